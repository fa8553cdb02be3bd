package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/cmd/kubectl-wrapup/view"
	"github.com/wrapup-dev/wrapup/gc/decision"
)

// objectKey names an object of the files an offline explain reads.
type objectKey struct {
	gk        schema.GroupKind
	namespace string
	name      string
}

// offlineObjects is what an offline explain reads instead of a cluster:
// the objects of files, served as a client.Reader to the same gathering
// and decision (view.ExplainWith) that explain runs on a cluster.
type offlineObjects struct {
	objects map[objectKey]*unstructured.Unstructured
	rules   []wrapupv1alpha1.CompletionRule
	// appWrappers are the AppWrappers of the files, in their order.
	appWrappers []types.NamespacedName
	// notes say what the files leave out and how it is taken.
	notes []string
	// unplaced are objects given without a namespace, until settle places
	// them.
	unplaced []unplaced
	// seen says where each object was read.
	seen map[objectKey]string
}

var _ client.Reader = (*offlineObjects)(nil)

// Get reads an object of the files; one not given is not found.
func (o *offlineObjects) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	gvk, err := apiutil.GVKForObject(obj, scheme)
	if err != nil {
		return err
	}
	u, ok := o.objects[objectKey{gvk.GroupKind(), key.Namespace, key.Name}]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Group: gvk.Group, Resource: strings.ToLower(gvk.Kind)}, key.Name)
	}
	if out, ok := obj.(*unstructured.Unstructured); ok {
		u.DeepCopyInto(out)
		return nil
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.DeepCopy().Object, obj)
}

// List lists the rules of the files: the only list a decision reads.
func (o *offlineObjects) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	rl, ok := list.(*wrapupv1alpha1.CompletionRuleList)
	if !ok {
		return fmt.Errorf("an offline explain lists only CompletionRules, not %T", list)
	}
	rl.Items = nil
	for i := range o.rules {
		rl.Items = append(rl.Items, *o.rules[i].DeepCopy())
	}
	return nil
}

// offlineUID is the UID given to an AppWrapper of a file that has none, so
// that the components given beside it can be its own.
func offlineUID(key types.NamespacedName) types.UID {
	return types.UID("offline-" + key.Namespace + "-" + key.Name)
}

// loadOffline reads the objects of docs for an offline explain, in
// namespace ns when a document gives none: the CompletionRules (as the
// API server would store them: lint's findings on them are returned), the
// AppWrappers, their Namespaces and the trigger objects. A trigger object
// given without a controller is taken as the component of the AppWrapper
// beside it whose kind and name it has (the AppWrapper controller would
// have created it so: controlled by the AppWrapper, with its label).
func loadOffline(ctx context.Context, docs []*document, ns string) (*offlineObjects, []finding, error) {
	o := &offlineObjects{objects: map[objectKey]*unstructured.Unstructured{}, seen: map[objectKey]string{}}
	rs, err := loadRuleSchema()
	if err != nil {
		return nil, nil, err
	}
	var findings []finding
	where := o.seen
	for _, d := range docs {
		tm, err := typeOf(d)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", d.Where(), err)
		}
		if tm.Kind == "" {
			continue
		}
		if isRule(tm) {
			fs, rule := lintDocument(ctx, rs, d, tm, lintSchemas{})
			findings = append(findings, d.placeExpressions("", fs)...)
			if err := o.addRule(rule, d.Where()); err != nil {
				return nil, nil, err
			}
			continue
		}
		obj, err := d.object()
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", d.Where(), err)
		}
		items := []map[string]any{obj}
		if tm.Kind == "List" && tm.APIVersion == "v1" {
			// What kubectl get -o yaml prints for several objects.
			items = nil
			list, _, _ := unstructured.NestedSlice(obj, "items")
			for _, it := range list {
				if m, ok := it.(map[string]any); ok {
					items = append(items, m)
				}
			}
		}
		for i, it := range items {
			at := d.Where()
			if len(items) > 1 || tm.Kind == "List" {
				at = fmt.Sprintf("%s (items[%d])", d.Where(), i)
			}
			av, _ := it["apiVersion"].(string)
			k, _ := it["kind"].(string)
			if itm := (metav1.TypeMeta{APIVersion: av, Kind: k}); isRule(itm) {
				prefix := fmt.Sprintf("items[%d].", i)
				fs, rule := lintRuleObject(ctx, rs, it, itm, lintSchemas{}, func(f string) string { return d.At(prefix + f) })
				findings = append(findings, d.placeExpressions(prefix, fs)...)
				if err := o.addRule(rule, at); err != nil {
					return nil, nil, err
				}
				continue
			}
			if err := o.add(&unstructured.Unstructured{Object: it}, at, ns, where); err != nil {
				return nil, nil, err
			}
		}
	}
	if err := o.settle(); err != nil {
		return nil, nil, err
	}
	return o, findings, nil
}

// addRule adds rule, read at where (nil: it did not decode).
func (o *offlineObjects) addRule(rule *wrapupv1alpha1.CompletionRule, where string) error {
	if rule == nil {
		return nil
	}
	if slices.ContainsFunc(o.rules, func(r wrapupv1alpha1.CompletionRule) bool { return r.Name == rule.Name }) {
		return fmt.Errorf("%s: a second CompletionRule named %s", where, rule.Name)
	}
	// Compiled programs are cached by UID, as the controller caches them:
	// a rule of a file has none (or one copied beside another's), and
	// would be evaluated with the expressions of another rule sharing it.
	if rule.UID == "" || slices.ContainsFunc(o.rules, func(r wrapupv1alpha1.CompletionRule) bool { return r.UID == rule.UID }) {
		rule.UID = offlineRuleUID(rule.Name)
	}
	o.rules = append(o.rules, *rule)
	return nil
}

// offlineRuleUID is the UID given to a CompletionRule of a file that has
// none: one per name, as the API server gives one per rule.
func offlineRuleUID(name string) types.UID {
	return types.UID("offline-rule-" + name)
}

// add adds u, read at where, to the objects, in namespace ns when it
// gives none; seen says where each object was read.
func (o *offlineObjects) add(u *unstructured.Unstructured, where, ns string, seen map[objectKey]string) error {
	gvk := u.GroupVersionKind()
	isAW := gvk.GroupKind() == awv1beta2.GroupVersion.WithKind("AppWrapper").GroupKind()
	if gvk.Kind == "" || gvk.Version == "" {
		return fmt.Errorf("%s: the object has no apiVersion or kind", where)
	}
	if u.GetName() == "" {
		if isAW {
			return fmt.Errorf("%s: the AppWrapper has no metadata.name", where)
		}
		// Not an object a decision reads (a kustomization.yaml, a
		// template with generateName): skipped, as lint skips it.
		return nil
	}
	switch {
	case gvk.GroupKind() == (schema.GroupKind{Kind: "Namespace"}):
		u.SetNamespace("")
	case u.GetNamespace() == "" && !isAW:
		// Placed once every AppWrapper is read: in the namespace of the
		// AppWrapper it is a component of (settle).
		o.unplaced = append(o.unplaced, unplaced{u: u, where: where, ns: ns})
		return nil
	case u.GetNamespace() == "":
		u.SetNamespace(ns)
	}
	return o.put(u, where, seen)
}

// put adds u, whose namespace is set, to the objects.
func (o *offlineObjects) put(u *unstructured.Unstructured, where string, seen map[objectKey]string) error {
	gvk := u.GroupVersionKind()
	key := objectKey{gvk.GroupKind(), u.GetNamespace(), u.GetName()}
	if prev, dup := seen[key]; dup {
		return fmt.Errorf("%s: %s %s/%s is given twice (first at %s)", where, gvk.Kind, key.namespace, key.name, prev)
	}
	seen[key] = where
	if gvk.GroupKind() == awv1beta2.GroupVersion.WithKind("AppWrapper").GroupKind() {
		o.appWrappers = append(o.appWrappers, types.NamespacedName{Namespace: key.namespace, Name: key.name})
	}
	o.objects[key] = u
	return nil
}

// unplaced is an object given without a namespace, placed by settle.
type unplaced struct {
	u         *unstructured.Unstructured
	where, ns string
}

// settle completes the objects once all are added: the AppWrappers'
// components are adopted, and the Namespaces a rule needs are there.
func (o *offlineObjects) settle() error {
	// An object given without a namespace is in the namespace of the
	// AppWrapper it is a component of (else in -n's).
	for _, p := range o.unplaced {
		gk := p.u.GroupVersionKind().GroupKind()
		ns := p.ns
		for _, key := range o.appWrappers {
			if o.names(key, gk, p.u.GetName()) {
				ns = key.Namespace
				break
			}
		}
		p.u.SetNamespace(ns)
		if err := o.put(p.u, p.where, o.seen); err != nil {
			return err
		}
	}
	o.unplaced = nil
	for _, key := range o.appWrappers {
		u := o.objects[objectKey{awv1beta2.GroupVersion.WithKind("AppWrapper").GroupKind(), key.Namespace, key.Name}]
		if u.GetUID() != "" {
			continue
		}
		// Without a UID: the one its components' owner reference gives,
		// when one names it (they were read from the same cluster); else
		// one made up, so that the components given beside it are its own.
		uid := offlineUID(key)
		for _, obj := range o.objects {
			if ref := metav1.GetControllerOf(obj); obj.GetNamespace() == key.Namespace && ref != nil &&
				ref.Kind == "AppWrapper" && ref.Name == key.Name && ref.UID != "" {
				uid = ref.UID
				break
			}
		}
		u.SetUID(uid)
	}
	for _, key := range o.appWrappers {
		if err := o.adopt(key); err != nil {
			return err
		}
		if _, ok := o.objects[objectKey{schema.GroupKind{Kind: "Namespace"}, "", key.Namespace}]; !ok &&
			slices.ContainsFunc(o.rules, func(r wrapupv1alpha1.CompletionRule) bool { return r.Spec.NamespaceSelector != nil }) {
			// A rule selects by Namespace labels: a Namespace not given
			// has none.
			nsObj := &unstructured.Unstructured{}
			nsObj.SetAPIVersion("v1")
			nsObj.SetKind("Namespace")
			nsObj.SetName(key.Namespace)
			o.objects[objectKey{schema.GroupKind{Kind: "Namespace"}, "", key.Namespace}] = nsObj
			o.notes = append(o.notes, fmt.Sprintf("Namespace %s is not given: it is taken without labels", key.Namespace))
		}
	}
	return nil
}

// adopt makes the objects given for the components of the AppWrapper key
// its own, as the AppWrapper controller creates them: controlled by it and
// labelled with its name. An object already controlled by something is
// left as it is (the decision says when it is not the AppWrapper's).
func (o *offlineObjects) adopt(key types.NamespacedName) error {
	u := o.objects[objectKey{awv1beta2.GroupVersion.WithKind("AppWrapper").GroupKind(), key.Namespace, key.Name}]
	aw := &awv1beta2.AppWrapper{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, aw); err != nil {
		return fmt.Errorf("AppWrapper %s: %w", key, err)
	}
	for i, c := range aw.Spec.Components {
		var tmpl struct {
			metav1.TypeMeta `json:",inline"`
			Metadata        metav1.ObjectMeta `json:"metadata"`
		}
		if err := json.Unmarshal(c.Template.Raw, &tmpl); err != nil {
			return fmt.Errorf("AppWrapper %s: spec.components[%d].template: %w", key, i, err)
		}
		gk := schema.FromAPIVersionAndKind(tmpl.APIVersion, tmpl.Kind).GroupKind()
		name := componentName(aw, i, tmpl.Metadata.Name)
		obj, ok := o.objects[objectKey{gk, key.Namespace, name}]
		if !ok || name == "" || metav1.GetControllerOf(obj) != nil {
			continue
		}
		obj.SetOwnerReferences(append(obj.GetOwnerReferences(), metav1.OwnerReference{
			APIVersion: awv1beta2.GroupVersion.String(), Kind: "AppWrapper", Name: aw.Name, UID: aw.UID,
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
		}))
		labels := obj.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[awv1beta2.AppWrapperLabel] = aw.Name
		obj.SetLabels(labels)
	}
	return nil
}

// componentName is the name of component i of aw: its template's, or, for
// a template with generateName, the one the AppWrapper controller gave it
// (status.componentStatus), as the decision finds it.
func componentName(aw *awv1beta2.AppWrapper, i int, template string) string {
	if template == "" && i < len(aw.Status.ComponentStatus) {
		return aw.Status.ComponentStatus[i].Name
	}
	return template
}

// names says whether the AppWrapper key has a component of kind gk named
// name.
func (o *offlineObjects) names(key types.NamespacedName, gk schema.GroupKind, name string) bool {
	u := o.objects[objectKey{awv1beta2.GroupVersion.WithKind("AppWrapper").GroupKind(), key.Namespace, key.Name}]
	aw := &awv1beta2.AppWrapper{}
	if u == nil || runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, aw) != nil {
		return false
	}
	for i, c := range aw.Spec.Components {
		var tmpl struct {
			metav1.TypeMeta `json:",inline"`
			Metadata        metav1.ObjectMeta `json:"metadata"`
		}
		if json.Unmarshal(c.Template.Raw, &tmpl) != nil {
			continue
		}
		if schema.FromAPIVersionAndKind(tmpl.APIVersion, tmpl.Kind).GroupKind() == gk && componentName(aw, i, tmpl.Metadata.Name) == name {
			return true
		}
	}
	return false
}

// expectation is what an offline explain is expected to decide for one
// AppWrapper (--expect): its verdict and, when given, the winning rule and
// the trigger's name.
type expectation struct {
	Verdict string `json:"verdict"`
	Rule    string `json:"rule,omitempty"`
	Trigger string `json:"trigger,omitempty"`
}

// parseExpectations reads --expect values: [NAMESPACE/]NAME=VERDICT, or a
// YAML file mapping [NAMESPACE/]NAME to {verdict, rule, trigger}. A name
// without a namespace is in ns.
func parseExpectations(values []string, ns string) (map[types.NamespacedName]expectation, error) {
	out := map[types.NamespacedName]expectation{}
	add := func(name string, e expectation, from string) error {
		key := namespacedName(name, ns)
		if key.Name == "" || e.Verdict == "" {
			return fmt.Errorf("--expect %s: want [NAMESPACE/]NAME=VERDICT, or a file of NAME: {verdict: VERDICT, rule: RULE, trigger: NAME}", from)
		}
		if !slices.Contains(verdicts, e.Verdict) {
			return fmt.Errorf("--expect %s: %q is not a verdict: one of %s", from, e.Verdict, strings.Join(verdicts, ", "))
		}
		if _, dup := out[key]; dup {
			return fmt.Errorf("--expect %s: %s is expected twice", from, key)
		}
		out[key] = e
		return nil
	}
	for _, v := range values {
		if name, verdict, ok := strings.Cut(v, "="); ok && !manifestFile(v) {
			if err := add(name, expectation{Verdict: verdict}, v); err != nil {
				return nil, err
			}
			continue
		}
		data, err := os.ReadFile(v)
		if err != nil {
			return nil, fmt.Errorf("--expect: %w", err)
		}
		var m map[string]expectation
		if err := yaml.UnmarshalStrict(data, &m); err != nil {
			return nil, fmt.Errorf("--expect %s: %w", v, err)
		}
		for _, name := range slices.Sorted(maps.Keys(m)) {
			if err := add(name, m[name], v+": "+name); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// verdicts are the verdicts --expect accepts.
var verdicts = func() []string {
	var out []string
	for _, v := range decision.Verdicts() {
		out = append(out, string(v))
	}
	return out
}()

// unmet says how ex falls short of e; "" when it does not.
func (e expectation) unmet(ex *view.Explanation) string {
	var got []string
	if string(ex.Verdict) != e.Verdict {
		got = append(got, fmt.Sprintf("verdict %s, expected %s", ex.Verdict, e.Verdict))
	}
	if e.Rule != "" && ex.Winner != e.Rule {
		got = append(got, fmt.Sprintf("rule %s, expected %s", orNone(ex.Winner), e.Rule))
	}
	if e.Trigger != "" {
		name := ""
		if ex.Trigger != nil {
			name = ex.Trigger.Name
		}
		if name != e.Trigger {
			got = append(got, fmt.Sprintf("trigger %s, expected %s", orNone(name), e.Trigger))
		}
	}
	return strings.Join(got, "; ")
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// offlineFlags are explain's flags for an offline explanation.
type offlineFlags struct {
	src, rules sources
	expect     []string
	at, output string
}

// explainOffline explains the AppWrappers of files (those named in names,
// or all), with no cluster.
func explainOffline(ctx context.Context, cf *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams, f offlineFlags, names []string) error {
	if f.src.empty() {
		return errors.New("an offline explain needs the AppWrappers: -f FILE")
	}
	if stdinUses(append(f.src.Filenames, f.rules.Filenames...)) > 1 {
		return errors.New("stdin (-) can be read once")
	}
	now := time.Now()
	if f.at != "" {
		t, err := time.Parse(time.RFC3339, f.at)
		if err != nil {
			return fmt.Errorf("--now %q: want an RFC 3339 time, such as 2026-12-03T10:00:00Z", f.at)
		}
		now = t
	}
	ns := namespaceOf(cf)
	expected, err := parseExpectations(f.expect, ns)
	if err != nil {
		return err
	}
	docs, _, err := f.src.read(streams.In)
	if err != nil {
		return failed("%v", err)
	}
	ruleDocs, _, err := f.rules.read(streams.In)
	if err != nil {
		return failed("%v", err)
	}
	objs, findings, err := loadOffline(ctx, append(docs, ruleDocs...), ns)
	if err != nil {
		return failed("%v", err)
	}

	bad := false
	for _, fd := range findings {
		if fd.Severity == sevError {
			fmt.Fprintln(streams.ErrOut, fd)
			bad = true
		}
	}
	switch {
	case bad:
		return failed("a CompletionRule above is one the API server or wrapup's webhook refuses: fix it first (kubectl wrapup lint says more)")
	case len(objs.rules) == 0:
		return failed("no CompletionRule given: --rules FILE|DIR (or rules among the -f files)")
	case len(objs.appWrappers) == 0:
		return failed("no AppWrapper in the -f files")
	}
	keys := objs.appWrappers
	if len(names) > 0 {
		keys = nil
		for _, n := range names {
			key := namespacedName(n, ns)
			if !slices.Contains(objs.appWrappers, key) {
				return failed("AppWrapper %s is not in the -f files", key)
			}
			keys = append(keys, key)
		}
	}
	for key := range expected {
		if !slices.Contains(keys, key) {
			return failed("--expect names AppWrapper %s, which is not explained (not in the -f files, or not named)", key)
		}
	}
	var items []any
	var unmet []string
	for i, key := range keys {
		ex, err := view.ExplainWithWorkers(ctx, objs, nil, nil, key, now)
		if err != nil {
			return failed("%v", err)
		}
		present(ctx, objs, ex)
		if n := readyNote(ex, true); n != "" && !slices.Contains(objs.notes, n) {
			// Said once, after every explanation.
			objs.notes = append(objs.notes, n)
		}
		if e, ok := expected[key]; ok {
			if why := e.unmet(ex); why != "" {
				unmet = append(unmet, fmt.Sprintf("%s: %s", key, why))
			}
		}
		if f.output != "" {
			u, err := explanationObject(ex)
			if err != nil {
				return failed("%v", err)
			}
			items = append(items, u.Object)
			continue
		}
		if i > 0 {
			fmt.Fprintln(streams.Out)
		}
		fmt.Fprint(streams.Out, ex.String())
	}
	if f.output != "" {
		var obj runtime.Object = &unstructured.Unstructured{Object: items[0].(map[string]any)}
		if len(items) > 1 {
			obj = &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "List", "items": items}}
		}
		if err := printObject(streams.Out, f.output, obj); err != nil {
			return failed("%v", err)
		}
	} else {
		for _, n := range objs.notes {
			fmt.Fprintf(streams.Out, "\nNote: %s\n", n)
		}
	}
	for _, u := range unmet {
		fmt.Fprintf(streams.ErrOut, "expectation not met: %s\n", u)
	}
	if len(unmet) > 0 {
		return quietly(exitFail)
	}
	if len(expected) > 0 && f.output == "" {
		fmt.Fprintf(streams.ErrOut, "%s met\n", plural(len(expected), "expectation"))
	}
	return nil
}

// namespaceOf is the namespace -n gives; "default" without it.
func namespaceOf(cf *genericclioptions.ConfigFlags) string {
	if cf.Namespace != nil && *cf.Namespace != "" {
		return *cf.Namespace
	}
	return "default"
}

// explainFiles decides, offline, on the AppWrapper aw (read from awFile)
// with its trigger (read from triggerFile), under rule alone.
func explainFiles(ctx context.Context, rule *wrapupv1alpha1.CompletionRule, aw map[string]any, awFile string, trigger map[string]any, triggerFile, ns string) (*view.Explanation, error) {
	o := &offlineObjects{objects: map[objectKey]*unstructured.Unstructured{}, rules: []wrapupv1alpha1.CompletionRule{*rule}, seen: map[objectKey]string{}}
	if err := o.add(&unstructured.Unstructured{Object: runtime.DeepCopyJSON(aw)}, awFile, ns, o.seen); err != nil {
		return nil, err
	}
	key := o.appWrappers[0]
	if err := o.add(&unstructured.Unstructured{Object: runtime.DeepCopyJSON(trigger)}, triggerFile, key.Namespace, o.seen); err != nil {
		return nil, err
	}

	if err := o.settle(); err != nil {
		return nil, err
	}
	return view.ExplainWithWorkers(ctx, o, nil, nil, key, time.Now())
}

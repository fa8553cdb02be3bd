package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	"github.com/spf13/cobra"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/cmd/kubectl-wrapup/view"
	"github.com/wrapup-dev/wrapup/gc/decision"
	"github.com/wrapup-dev/wrapup/gc/read"
	"github.com/wrapup-dev/wrapup/gc/triggers"
)

// requestTimeout bounds each request to the API server when
// --request-timeout is not given, so that an unreachable cluster fails the
// command rather than hanging it.
const requestTimeout = 30 * time.Second

// requestTimeoutSet says whether the command line gave --request-timeout
// (0 then means no timeout, as for kubectl).
var requestTimeoutSet bool

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(awv1beta2.AddToScheme(s))
	utilruntime.Must(wrapupv1alpha1.AddToScheme(s))
	utilruntime.Must(kueue.AddToScheme(s))
	return s
}()

// workerReaders reads MultiKueue worker clusters for explain: from the
// kubeconfig files given per MultiKueueCluster name, else from wrapup's
// own kubeconfig Secret of that name in secretsNS (which the user may not
// be allowed to read).
func workerReaders(c client.Reader, files map[string]string, secretsNS string) view.WorkerReader {
	return func(ctx context.Context, cluster string) (client.Reader, error) {
		var cfg *rest.Config
		var err error
		if path, ok := files[cluster]; ok {
			cfg, err = clientcmd.BuildConfigFromFlags("", path)
			if err != nil {
				return nil, fmt.Errorf("worker cluster %s: loading %s: %w", cluster, path, err)
			}
		} else {
			secret := &corev1.Secret{}
			if err := c.Get(ctx, types.NamespacedName{Namespace: secretsNS, Name: cluster}, secret); err != nil {
				return nil, fmt.Errorf("worker cluster %s: reading wrapup's kubeconfig Secret %s/%s: %w (or give --worker-kubeconfig %s=PATH)", cluster, secretsNS, cluster, err, cluster)
			}
			if cfg, err = clientcmd.RESTConfigFromKubeConfig(secret.Data[read.KubeconfigKey]); err != nil {
				return nil, fmt.Errorf("worker cluster %s: the kubeconfig in Secret %s/%s: %w", cluster, secretsNS, cluster, err)
			}
		}
		cfg.Timeout = requestTimeout
		wc, err := client.New(cfg, client.Options{Scheme: scheme})
		if err != nil {
			return nil, fmt.Errorf("worker cluster %s: %w", cluster, err)
		}
		return wc, nil
	}
}

// clientGetter gives a command its cluster: a client, and the namespace
// kubectl's flags (or the kubeconfig) pick. Tests give one over a fake
// client.
type clientGetter func() (client.Client, string, error)

// flagsCluster is the clientGetter of kubectl's flags.
func flagsCluster(cf *genericclioptions.ConfigFlags) clientGetter {
	return func() (client.Client, string, error) { return newClient(cf) }
}

// newClient connects to the cluster kubectl's flags pick, and returns the
// namespace to use.
func newClient(cf *genericclioptions.ConfigFlags) (client.Client, string, error) {
	cfg, err := cf.ToRESTConfig()
	if err != nil {
		return nil, "", fmt.Errorf("loading kubeconfig: %w", err)
	}
	if !requestTimeoutSet {
		cfg.Timeout = requestTimeout
	}
	ns, _, err := cf.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, "", fmt.Errorf("loading kubeconfig: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, "", fmt.Errorf("creating client: %w", err)
	}
	return c, ns, nil
}

// printObject prints obj with cli-runtime's printers (json, yaml, name,
// and kubectl's templates).
func printObject(w io.Writer, format string, obj runtime.Object) error {
	pf := genericclioptions.NewPrintFlags("").WithTypeSetter(scheme)
	pf.OutputFormat = &format
	p, err := pf.ToPrinter()
	if err != nil {
		return err
	}
	return p.PrintObj(obj, w)
}

const explainLong = `Say what wrapup does with a live AppWrapper, and why: which rules match and
which wins, the trigger, its evaluation, the recorded outcome, and what
happens next and when. It reads the AppWrapper, its Namespace, the rules and
the trigger, and decides with the controller's own decision code. Read-only.

For an AppWrapper that is gone, its CompletionRecord: how its run ended.

Offline, with -f: the AppWrappers of the files (or those named), under the
CompletionRules of --rules (and of the files), with the trigger objects,
Namespaces and status the files give, decided by the same code, with no
cluster. A component object given without an owner is taken as the
AppWrapper's own, as its controller creates it; one not given counts as not
created yet. --expect checks the verdicts (exit 1 when one is not met), so a
folder of AppWrappers and expected verdicts can test rules in CI.`

// explainOptions are explain's flags, and what Complete makes of them and
// of the arguments: kubectl's Complete, Validate, Run.
type explainOptions struct {
	output, workerSecrets, at, sa string
	workerFiles                   map[string]string
	src, rules                    sources
	expect                        []string

	// args are the AppWrapper names given.
	args []string
	// offline: the AppWrappers are read from files.
	offline bool

	cf      *genericclioptions.ConfigFlags
	cluster clientGetter
	streams genericiooptions.IOStreams
}

func newExplainCommand(cf *genericclioptions.ConfigFlags, cluster clientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	o := &explainOptions{cf: cf, cluster: cluster, streams: streams}
	cmd := &cobra.Command{
		Use:   "explain (APPWRAPPER | -f APPWRAPPERS.yaml [--rules RULES] [--expect NAME=VERDICT|FILE])",
		Short: "Say what wrapup does with a live AppWrapper, and why",
		Long:  explainLong,
		Example: examples(
			"# Why is my benchmark's AppWrapper still there?",
			"kubectl wrapup explain llama-sweep -n team-a",
			"",
			"# The same, for scripts",
			"kubectl wrapup explain llama-sweep -n team-a -o json",
			"",
			"# Offline: an AppWrapper and its finished Job under a folder of rules",
			"kubectl wrapup explain -f llama-sweep.yaml -f guidellm-job.yaml --rules rules/",
			"",
			"# In CI: every AppWrapper of a test folder gets the verdict expected",
			"kubectl wrapup explain -f tests/ --rules rules/ --expect tests/expect.yaml",
		),
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: completeAppWrappers(cluster),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Complete(args)
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	addOutputFlag(cmd, &o.output, "Output format: json or yaml (default: for people).", "json", "yaml")
	addSourceFlags(cmd, &o.src, "AppWrappers and the objects beside them (triggers, Namespaces, rules): explain offline")
	cmd.Flags().StringSliceVar(&o.rules.Filenames, "rules", nil, "Offline: a file or folder of CompletionRules; repeatable.")
	cmd.Flags().StringArrayVar(&o.expect, "expect", nil, "Offline: the verdict expected, as [NAMESPACE/]NAME=VERDICT, or a YAML file of NAME: {verdict: V, rule: R, trigger: T}; repeatable. Exit 1 when one is not met.")
	cmd.Flags().StringVar(&o.at, "now", "", "Offline: decide at this instant (RFC 3339) rather than now, for stable tests.")
	cmd.Flags().StringVar(&o.sa, "wrapup-service-account", "", saFlagUsage("explain decides with its rights (which trigger kinds it may list), asked with a SubjectAccessReview"))
	_ = cmd.MarkFlagFilename("rules", "yaml", "yml", "json")
	cmd.Flags().StringToStringVar(&o.workerFiles, "worker-kubeconfig", nil,
		"For an AppWrapper that MultiKueue dispatched: the kubeconfig file of its worker cluster, as MULTIKUEUECLUSTER=PATH (repeatable; default: wrapup's kubeconfig Secret of that name, see --worker-secrets-namespace).")
	cmd.Flags().StringVar(&o.workerSecrets, "worker-secrets-namespace", "", workerSecretsUsage)
	return cmd
}

// Complete takes the arguments: offline when files, rules, expectations
// or an instant are given.
func (o *explainOptions) Complete(args []string) {
	o.args = args
	o.offline = !o.src.empty() || !o.rules.empty() || len(o.expect) > 0 || o.at != ""
}

// Validate checks the flags and the arguments of a live explain (an
// offline one checks its own as it reads the files).
func (o *explainOptions) Validate() error {
	if err := checkOutput(o.output, "json", "yaml"); err != nil {
		return err
	}
	if o.offline {
		return nil
	}
	if len(o.args) != 1 {
		return errors.New("explain needs an AppWrapper's name, or -f FILE to explain the AppWrappers of files offline")
	}
	if err := checkServiceAccount(o.sa); o.sa != "" && err != nil {
		return err
	}
	if strings.Contains(o.args[0], "/") {
		return fmt.Errorf("%q is not an AppWrapper name: give the namespace with -n", o.args[0])
	}
	return nil
}

// Run explains: offline, the AppWrappers of the files; live, the
// AppWrapper named, or, when it is gone, its CompletionRecord.
func (o *explainOptions) Run(ctx context.Context) error {
	if o.offline {
		return explainOffline(ctx, o.cf, o.streams, offlineFlags{src: o.src, rules: o.rules, expect: o.expect, at: o.at, output: o.output}, o.args)
	}
	c, ns, err := o.cluster()
	if err != nil {
		return failed("%v", err)
	}
	out := o.streams.Out
	key := types.NamespacedName{Namespace: ns, Name: o.args[0]}
	sa := findServiceAccount(ctx, c, o.sa)
	opts := view.ExplainOptions{Workers: workerReaders(c, o.workerFiles, secretsNamespace(o.workerSecrets, sa)), Access: sa.access(c)}
	ex, err := view.ExplainWith(ctx, c, opts, nil, key, time.Now())
	if err == nil {
		present(ctx, c, ex)
		for _, n := range []string{readyNote(ex, false), sa.note} {
			if n != "" {
				ex.Notes = append(ex.Notes, n)
			}
		}
	}
	if apierrors.IsNotFound(err) {
		// Gone: its CompletionRecord says how its run ended.
		records, lerr := view.Records(ctx, c, ns, key.Name, nil)
		if lerr == nil && len(records) > 0 {
			if o.output != "" {
				return printRecords(out, o.output, records[:1])
			}
			fmt.Fprint(out, view.DescribeRecord(&records[0]))
			if len(records) > 1 {
				fmt.Fprintf(out, "            %d earlier run(s) of an AppWrapper of this name: kubectl wrapup history -n %s\n", len(records)-1, ns)
			}
			return nil
		}
	}
	if apierrors.IsForbidden(err) {
		return failed("%v\n(explain reads the cluster's CompletionRules and the AppWrapper's Namespace besides your namespace's objects: "+
			"ask an admin to bind you the ClusterRole wrapup-explain with a ClusterRoleBinding; see docs/plugin.md)", err)
	}
	if err != nil {
		return failed("%v", err)
	}
	if o.output != "" {
		u, err := explanationObject(ex)
		if err != nil {
			return failed("%v", err)
		}
		return printObject(out, o.output, u)
	}
	fmt.Fprint(out, ex.String())
	return nil
}

// completeAppWrappers completes an AppWrapper name: those of the namespace
// kubectl's flags pick, that begin with what was typed.
func completeAppWrappers(cluster clientGetter) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		// A cluster that cannot be read completes nothing, as kubectl's
		// own completion of resource names does.
		c, ns, err := cluster()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var list awv1beta2.AppWrapperList
		if err := c.List(cmd.Context(), &list, client.InNamespace(ns)); err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return withPrefix(list.Items, func(aw awv1beta2.AppWrapper) string { return aw.Name }, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// withPrefix are the names of items that start with prefix, as
// completions.
func withPrefix[T any](items []T, name func(T) string, prefix string) []cobra.Completion {
	var names []cobra.Completion
	for _, it := range items {
		if n := name(it); strings.HasPrefix(n, prefix) {
			names = append(names, n)
		}
	}
	return names
}

// explanationObject is an explanation as -o json|yaml prints it: the
// decision's fields, as an object of kind Explanation (output only, never
// served).
func explanationObject(ex *view.Explanation) (*unstructured.Unstructured, error) {
	d := ex.Decision
	obj := map[string]any{
		"apiVersion": wrapupv1alpha1.GroupVersion.String(),
		"kind":       "Explanation",
		"metadata":   map[string]any{"name": ex.AppWrapper.Name, "namespace": ex.AppWrapper.Namespace},
		"at":         ex.At.UTC().Format(time.RFC3339),
		"phase":      string(ex.Phase),
		"verdict":    string(d.Verdict),
		"reason":     d.Reason,
	}
	set := func(k string, v any) {
		if v != nil && v != "" {
			obj[k] = v
		}
	}
	set("winner", d.Winner)
	set("outcome", string(d.Outcome))
	if d.Action.Action != "" {
		a := map[string]any{"action": string(d.Action.Action), "dryRun": d.DryRun}
		if d.Action.TTLSecondsAfterFinished != nil {
			a["ttlSecondsAfterFinished"] = int64(*d.Action.TTLSecondsAfterFinished)
		}
		obj["action"] = a
	}
	if d.After > 0 {
		obj["after"] = d.After.Round(time.Second).String()
	}
	if !d.DueAt.IsZero() {
		obj["dueAt"] = d.DueAt.UTC().Format(time.RFC3339)
	}
	var rules []any
	for _, r := range d.Rules {
		rules = append(rules, map[string]any{"name": r.Name, "priority": int64(r.Priority), "ready": r.Ready,
			"matches": r.Matches, "valid": r.Valid, "wins": r.Wins, "why": r.Why})
	}
	set("rules", rules)
	trig := func(t decision.TriggerInfo, state string, e *decision.Evaluation) map[string]any {
		gvk := t.GroupVersionKind()
		m := map[string]any{"component": int64(t.Index), "apiVersion": gvk.GroupVersion().String(), "kind": gvk.Kind, "annotated": t.Annotated}
		for k, v := range map[string]string{"name": t.Name, "uid": string(t.UID), "problem": t.Problem, "state": state} {
			if v != "" {
				m[k] = v
			}
		}
		if e != nil {
			ev := map[string]any{"outcome": string(e.Outcome), "cost": int64(e.Cost), "fromAppWrapperPhase": e.FromAppWrapperPhase}
			if e.Message != "" {
				ev["message"] = e.Message
			}
			if e.Error != "" {
				ev["error"] = e.Error
			}
			m["evaluation"] = ev
		}
		return m
	}
	if d.Trigger != nil {
		obj["trigger"] = trig(*d.Trigger, "", d.Evaluation)
	}
	if w := d.Worker; w != nil {
		m := map[string]any{}
		for k, v := range map[string]string{"cluster": w.Cluster, "problem": w.Problem, "copyUID": w.CopyUID, "copyPhase": string(w.CopyPhase)} {
			if v != "" {
				m[k] = v
			}
		}
		obj["worker"] = m
	}
	if len(d.Candidates) > 0 {
		var cs []any
		for _, c := range d.Candidates {
			m := trig(c.TriggerInfo, c.State, c.Evaluation)
			m["decided"] = c.Decided
			cs = append(cs, m)
		}
		obj["candidates"] = cs
		obj["policy"] = string(d.Policy)
	}
	if r := d.Recorded; r != nil {
		obj["recorded"] = map[string]any{"outcome": string(r.Outcome), "rule": r.Rule, "finishedAt": r.FinishedAt.UTC().Format(time.RFC3339), "message": r.Message}
	}
	var events []any
	for _, e := range d.Events {
		events = append(events, map[string]any{"type": e.Type, "reason": e.Reason, "message": e.Message})
	}
	set("events", events)
	var notes []any
	for _, n := range ex.Notes {
		notes = append(notes, n)
	}
	if len(notes) > 0 {
		obj["notes"] = notes
	}
	return &unstructured.Unstructured{Object: runtime.DeepCopyJSON(obj)}, nil
}

// historyOptions are history's flags: kubectl's Complete, Validate, Run.
type historyOptions struct {
	selector, appWrapper, output string
	all                          bool

	// sel is the parsed selector.
	sel labels.Selector

	cluster clientGetter
	streams genericiooptions.IOStreams
}

func newHistoryCommand(cluster clientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	o := &historyOptions{cluster: cluster, streams: streams}
	cmd := &cobra.Command{
		Use:   "history [-n NAMESPACE | -A] [-l SELECTOR] [--appwrapper NAME]",
		Short: "List the finished runs wrapup recorded, the newest first",
		Long: `List the finished runs wrapup recorded (CompletionRecords), the newest first:
the AppWrapper, the outcome, the rule, the action, when, and the message.
The same records as kubectl get completionrecords, newest first.`,
		Example: examples(
			"# The runs of a namespace",
			"kubectl wrapup history -n team-a",
			"",
			"# Every failed benchmark, in every namespace, with the messages",
			"kubectl wrapup history -A -l wrapup.dev/outcome=Failed -o wide",
		),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().BoolVarP(&o.all, "all-namespaces", "A", false, "Runs of every namespace.")
	cmd.Flags().StringVarP(&o.selector, "selector", "l", "", "Label selector over the records' labels: the AppWrappers' own, and wrapup.dev/outcome, wrapup.dev/rule, wrapup.dev/appwrapper.")
	cmd.Flags().StringVar(&o.appWrapper, "appwrapper", "", "Only the runs of the AppWrapper of this name.")
	addOutputFlag(cmd, &o.output, "Output format: wide, json, yaml or name (default: a table).", "wide", "json", "yaml", "name")
	_ = cmd.RegisterFlagCompletionFunc("appwrapper", completeAppWrappers(cluster))
	return cmd
}

// Validate checks the output format and parses the selector.
func (o *historyOptions) Validate() error {
	if err := checkOutput(o.output, "wide", "json", "yaml", "name"); err != nil {
		return err
	}
	sel, err := labels.Parse(o.selector)
	if err != nil {
		return fmt.Errorf("bad selector: %v", err)
	}
	o.sel = sel
	return nil
}

// Run lists the records, the newest first.
func (o *historyOptions) Run(ctx context.Context) error {
	c, ns, err := o.cluster()
	if err != nil {
		return failed("%v", err)
	}
	if o.all {
		ns = ""
	}
	records, err := view.Records(ctx, c, ns, o.appWrapper, o.sel)
	if err != nil {
		return failed("%v", err)
	}
	switch o.output {
	case "json", "yaml", "name":
		return printRecords(o.streams.Out, o.output, records)
	}
	if len(records) == 0 {
		fmt.Fprintln(o.streams.ErrOut, "No finished runs recorded.")
		return nil
	}
	fmt.Fprint(o.streams.Out, view.HistoryTable(records, o.all, o.output == "wide", time.Now()))
	return nil
}

// printRecords prints records as a List (json, yaml) or one name a line.
func printRecords(w io.Writer, format string, records []wrapupv1alpha1.CompletionRecord) error {
	if format == "name" {
		p := &printers.NamePrinter{}
		for i := range records {
			r := records[i].DeepCopy()
			r.SetGroupVersionKind(wrapupv1alpha1.GroupVersion.WithKind("CompletionRecord"))
			if err := p.PrintObj(r, w); err != nil {
				return err
			}
		}
		return nil
	}
	list := &wrapupv1alpha1.CompletionRecordList{Items: records}
	for i := range list.Items {
		list.Items[i].SetGroupVersionKind(wrapupv1alpha1.GroupVersion.WithKind("CompletionRecord"))
	}
	return printObject(w, format, list)
}

// defaultServiceAccount is wrapup's ServiceAccount as the kustomize and
// Helm installs (a release named wrapup) create it.
const defaultServiceAccount = "wrapup-system:wrapup-controller"

// saFlagUsage is the usage of --wrapup-service-account.
func saFlagUsage(what string) string {
	return "wrapup's ServiceAccount, as NAMESPACE:NAME: " + what + ". Default: the one wrapup's manager Deployment " +
		"(labelled app.kubernetes.io/name=wrapup) runs as, else the one bound to wrapup's manager ClusterRole, else " +
		defaultServiceAccount + " if it exists; when none is found, the rights are not checked and a note says so."
}

// workerSecretsUsage is the usage of --worker-secrets-namespace.
const workerSecretsUsage = "Where wrapup keeps the kubeconfig Secrets of MultiKueue's worker clusters: the namespace it is installed in " +
	"(default: its ServiceAccount's, else wrapup-system)."

// secretsNamespace is --worker-secrets-namespace, or the namespace wrapup's
// ServiceAccount is in (the Helm release's), or the default install's.
func secretsNamespace(flag string, sa serviceAccount) string {
	switch {
	case flag != "":
		return flag
	case sa.namespace() != "":
		return sa.namespace()
	}
	return "wrapup-system"
}

// serviceAccountAccess asks the API server, with a SubjectAccessReview,
// whether wrapup's ServiceAccount sa ("NAMESPACE:NAME") may list and watch
// a resource in every namespace: explain then decides with wrapup's rights,
// not the user's. The user needs to be allowed to create
// SubjectAccessReviews; when not, explain says it could not check.
func serviceAccountAccess(c client.Client, sa string) triggers.AccessReview {
	ns, name, _ := strings.Cut(sa, ":")
	user := "system:serviceaccount:" + ns + ":" + name
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
	type answer struct {
		allowed bool
		why     string
		err     error
	}
	var mu sync.Mutex
	answers := map[schema.GroupResource]answer{}
	return func(ctx context.Context, gvr schema.GroupVersionResource) (bool, string, error) {
		// Asked once per resource for the command (plan explains every
		// AppWrapper twice).
		mu.Lock()
		defer mu.Unlock()
		if a, ok := answers[gvr.GroupResource()]; ok {
			return a.allowed, a.why, a.err
		}
		allowed, why, err := reviewAccess(ctx, c, user, groups, gvr)
		answers[gvr.GroupResource()] = answer{allowed, why, err}
		return allowed, why, err
	}
}

// reviewAccess asks whether user may list and watch gvr in every namespace.
func reviewAccess(ctx context.Context, c client.Client, user string, groups []string, gvr schema.GroupVersionResource) (bool, string, error) {
	{
		for _, verb := range []string{"list", "watch"} {
			review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: user, Groups: groups,
				ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: gvr.Group, Resource: gvr.Resource},
			}}
			if err := c.Create(ctx, review); err != nil {
				return false, "", fmt.Errorf("asking whether %s may %s %s: %w", user, verb, gvr.GroupResource(), err)
			}
			if !review.Status.Allowed {
				return false, triggers.DeniedList(verb, gvr.GroupResource()), nil
			}
		}
		return true, "", nil
	}
}

// checkServiceAccount validates --wrapup-service-account.
func checkServiceAccount(sa string) error {
	ns, name, ok := strings.Cut(sa, ":")
	if !ok || ns == "" || name == "" || strings.Contains(name, ":") {
		return fmt.Errorf("--wrapup-service-account %q: want NAMESPACE:NAME", sa)
	}
	return nil
}

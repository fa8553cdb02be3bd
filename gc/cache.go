package gc

import (
	"encoding/json"
	"slices"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/gc/decision"
	"github.com/wrapup-dev/wrapup/gc/intern"
)

// CacheOptions are the manager cache options for a manager that runs
// wrapup alone, as cmd/manager does. Objects are cached without
// managedFields, AppWrappers without what wrapup never reads
// (slimAppWrapper; their status keeps its phase and retries) and
// CompletionRecords likewise (slimCompletionRecord). Strings, label and
// annotation sets that many AppWrappers carry alike are kept once
// (intern.Cache).
//
// Another controller in the same manager (the AppWrapper controller
// itself) would see AppWrappers without their templates: do not use these
// options for a shared manager. wrapup works with a full cache too; it
// never writes an AppWrapper from the cache other than by a patch of its
// own labels and annotations, and a rule that reads the AppWrapper's
// annotations, spec or status is evaluated on the AppWrapper read from
// the API server.
func CacheOptions() cache.Options {
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&awv1beta2.AppWrapper{}:            {Transform: slimAppWrapper},
			&wrapupv1alpha1.CompletionRecord{}: {Transform: slimCompletionRecord},
		},
	}
}

// WithMultiKueue adds to o what wrapup on a MultiKueue manager cluster
// caches besides (Options.MultiKueue): Kueue's Workloads, of which it keeps
// the owner, the cluster they are dispatched to and the Finished condition,
// nothing of the spec. Only with Kueue's Workload kind served: the cache
// maps it when it is made.
func WithMultiKueue(o cache.Options) cache.Options {
	if o.ByObject == nil {
		o.ByObject = map[client.Object]cache.ByObject{}
	}
	o.ByObject[&kueue.Workload{}] = cache.ByObject{Transform: slimWorkload}
	return o
}

// slimWorkload is the cache transform of WithMultiKueue.
func slimWorkload(obj any) (any, error) {
	wl, ok := obj.(*kueue.Workload)
	if !ok {
		return obj, nil
	}
	var finished []metav1.Condition
	if c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadFinished); c != nil {
		finished = []metav1.Condition{*c}
	}
	return &kueue.Workload{
		TypeMeta: wl.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: wl.Name, Namespace: wl.Namespace, UID: wl.UID, ResourceVersion: wl.ResourceVersion,
			CreationTimestamp: wl.CreationTimestamp, OwnerReferences: wl.OwnerReferences},
		Status: kueue.WorkloadStatus{ClusterName: wl.Status.ClusterName, Conditions: finished},
	}, nil
}

// slimCompletionRecord keeps of a CompletionRecord what decisions and its
// retention read: of the triggers only the index and UID of those that
// decided; not the message, its labels or the AppWrapper's labels. (The
// final check reads the whole record from the API server.)
func slimCompletionRecord(obj any) (any, error) {
	cr, ok := obj.(*wrapupv1alpha1.CompletionRecord)
	if !ok {
		return obj, nil
	}
	cr.ManagedFields = nil
	var decided []wrapupv1alpha1.RecordedTrigger
	for _, t := range cr.Triggers {
		if t.Decided {
			decided = append(decided, wrapupv1alpha1.RecordedTrigger{ComponentIndex: t.ComponentIndex, UID: t.UID, Decided: true})
		}
	}
	cr.Triggers, cr.Message, cr.AppWrapper.Labels, cr.Labels = decided, "", nil, nil
	return cr, nil
}

// keptConditions are the AppWrapper conditions decisions read: Unhealthy
// (its controller is about to retry or fail it), DeletingResources (when
// it started holding a failed AppWrapper for debugging) and
// ResourcesDeployed (when it last deployed the components: a later
// deployment than a record's is a new attempt).
var keptConditions = []awv1beta2.AppWrapperCondition{awv1beta2.Unhealthy, awv1beta2.DeletingResources, awv1beta2.ResourcesDeployed}

// templateIdentity is what wrapup reads of a component template.
type templateIdentity struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	Metadata   struct {
		Name         string `json:"name,omitempty"`
		GenerateName string `json:"generateName,omitempty"`
		// Annotations keeps wrapup.dev/trigger alone: on the template's
		// own metadata, it marks the trigger too.
		Annotations map[string]string `json:"annotations,omitempty"`
	} `json:"metadata"`
}

// slimAppWrapper is the cache transform of CacheOptions.
func slimAppWrapper(obj any) (any, error) {
	aw, ok := obj.(*awv1beta2.AppWrapper)
	if !ok {
		return obj, nil
	}
	slimMetadata(aw)
	slimConditions(aw)
	if err := slimComponents(aw); err != nil {
		return nil, err
	}
	return aw, nil
}

// slimMetadata keeps of aw's metadata what a decision reads
// (decision.ReadsAppWrapperAnnotation), interned.
func slimMetadata(aw *awv1beta2.AppWrapper) {
	aw.ManagedFields = nil
	in := intern.Cache
	// Labels are kept whole (a rule may select on any), annotations only
	// if a decision reads them: a kubectl last-applied-configuration alone
	// can be larger than the rest.
	aw.Labels = in.Labels(aw.Labels)
	for k := range aw.Annotations {
		if !decision.ReadsAppWrapperAnnotation(k) {
			delete(aw.Annotations, k)
		}
	}
	aw.Annotations = in.Labels(aw.Annotations)
	aw.Namespace = in.Str(aw.Namespace)
	aw.APIVersion, aw.Kind = in.Str(aw.APIVersion), in.Str(aw.Kind)
	// No decision reads the finalizers (a deletion shows in the
	// deletionTimestamp), and a patch of the record leaves them as they are.
	aw.Finalizers = nil
	for i := range aw.OwnerReferences {
		o := &aw.OwnerReferences[i]
		o.APIVersion, o.Kind = in.Str(o.APIVersion), in.Str(o.Kind)
	}
}

// slimConditions keeps of aw's status conditions those a decision reads
// (keptConditions), and its phase, interned.
func slimConditions(aw *awv1beta2.AppWrapper) {
	in := intern.Cache
	var conds []metav1.Condition
	for _, t := range keptConditions {
		c := apimeta.FindStatusCondition(aw.Status.Conditions, string(t))
		if t == awv1beta2.Unhealthy && c != nil && c.Status != metav1.ConditionTrue && aw.Status.Phase != awv1beta2.AppWrapperFailed {
			// Read only when True (the controller may retry), or for its
			// message once the AppWrapper Failed.
			c = nil
		}
		if c != nil {
			c.Type, c.Status, c.Reason, c.Message = in.Str(c.Type), metav1.ConditionStatus(in.Str(string(c.Status))), in.Str(c.Reason), in.Str(c.Message)
			conds = append(conds, *c)
		}
	}
	aw.Status.Conditions = slices.Clip(conds)
	aw.Status.Phase = awv1beta2.AppWrapperPhase(in.Str(string(aw.Status.Phase)))
}

// slimComponents keeps of each component of aw its annotations and what
// names its trigger (templateIdentity): a component template, a
// Deployment's or a Job's pod template, is most of an AppWrapper's size.
func slimComponents(aw *awv1beta2.AppWrapper) error {
	in := intern.Cache
	// A component's status is read for its name only, and only when its
	// template has none (generateName): the others are dropped, and the
	// slice ends with the last one read.
	statuses := aw.Status.ComponentStatus
	aw.Status.ComponentStatus = nil
	// The components' identities share one buffer.
	var ids []byte
	for i := range aw.Spec.Components {
		c := &aw.Spec.Components[i]
		c.DeclaredPodSets, c.PodSetInfos = nil, nil
		c.Annotations = in.Labels(c.Annotations)
		var id templateIdentity
		if err := json.Unmarshal(c.Template.Raw, &id); err != nil {
			// Not an object: decision.FindTrigger reports it as a component
			// with no apiVersion/kind, as it would the whole template.
			c.Template.Raw, c.Template.Object = nil, nil
			continue
		}
		if v, ok := id.Metadata.Annotations[wrapupv1alpha1.TriggerAnnotation]; ok {
			id.Metadata.Annotations = map[string]string{wrapupv1alpha1.TriggerAnnotation: v}
		} else {
			id.Metadata.Annotations = nil
		}
		raw, err := json.Marshal(id)
		if err != nil {
			return err
		}
		if len(ids)+len(raw) > cap(ids) {
			ids = make([]byte, 0, len(raw)*(len(aw.Spec.Components)-i))
		}
		start := len(ids)
		ids = append(ids, raw...)
		c.Template.Raw, c.Template.Object = ids[start:len(ids):len(ids)], nil
		if id.Metadata.Name == "" && i < len(statuses) {
			if aw.Status.ComponentStatus == nil {
				aw.Status.ComponentStatus = make([]awv1beta2.AppWrapperComponentStatus, i+1, len(aw.Spec.Components))
			}
			aw.Status.ComponentStatus = aw.Status.ComponentStatus[:i+1]
			aw.Status.ComponentStatus[i] = awv1beta2.AppWrapperComponentStatus{Name: statuses[i].Name}
		}
	}
	return nil
}

package util

import (
	"encoding/json"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// AppWrapperWrapper builds AppWrappers for tests.
type AppWrapperWrapper struct{ awv1beta2.AppWrapper }

// MakeAppWrapper starts an unsuspended AppWrapper with no components.
func MakeAppWrapper(name, ns string) *AppWrapperWrapper {
	return &AppWrapperWrapper{awv1beta2.AppWrapper{
		TypeMeta:   metav1.TypeMeta{APIVersion: awv1beta2.GroupVersion.String(), Kind: "AppWrapper"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
	}}
}

// Component adds obj (a typed or unstructured object with apiVersion and
// kind set) as a component, with optional component annotations.
func (w *AppWrapperWrapper) Component(obj runtime.Object, annotations map[string]string) *AppWrapperWrapper {
	raw, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	return w.RawComponent(raw, annotations)
}

// RawComponent adds a component whose template is raw, as given (which
// need not be JSON), with optional component annotations.
func (w *AppWrapperWrapper) RawComponent(raw []byte, annotations map[string]string) *AppWrapperWrapper {
	w.Spec.Components = append(w.Spec.Components, awv1beta2.AppWrapperComponent{
		Annotations: annotations,
		Template:    runtime.RawExtension{Raw: raw},
	})
	return w
}

// Trigger adds obj as a component annotated as the trigger.
func (w *AppWrapperWrapper) Trigger(obj runtime.Object) *AppWrapperWrapper {
	return w.Component(obj, map[string]string{wrapupv1alpha1.TriggerAnnotation: "true"})
}

// Label sets a label on the AppWrapper.
func (w *AppWrapperWrapper) Label(k, v string) *AppWrapperWrapper {
	if w.Labels == nil {
		w.Labels = map[string]string{}
	}
	w.Labels[k] = v
	return w
}

// Annotation sets an annotation on the AppWrapper.
func (w *AppWrapperWrapper) Annotation(k, v string) *AppWrapperWrapper {
	if w.Annotations == nil {
		w.Annotations = map[string]string{}
	}
	w.Annotations[k] = v
	return w
}

// Suspend sets spec.suspend.
func (w *AppWrapperWrapper) Suspend(s bool) *AppWrapperWrapper {
	w.Spec.Suspend = s
	return w
}

// UID sets the AppWrapper's UID, as the API server would.
func (w *AppWrapperWrapper) UID(uid types.UID) *AppWrapperWrapper {
	w.AppWrapper.UID = uid
	return w
}

// Phase sets the phase the AppWrapper controller reports.
func (w *AppWrapperWrapper) Phase(p awv1beta2.AppWrapperPhase) *AppWrapperWrapper {
	w.Status.Phase = p
	return w
}

// Condition adds a status condition as the AppWrapper controller writes
// it, which last changed at at.
func (w *AppWrapperWrapper) Condition(t awv1beta2.AppWrapperCondition, status metav1.ConditionStatus, reason string, at time.Time) *AppWrapperWrapper {
	w.Status.Conditions = append(w.Status.Conditions, metav1.Condition{Type: string(t), Status: status, Reason: reason, LastTransitionTime: metav1.NewTime(at)})
	return w
}

// Retries sets how many times the AppWrapper controller has reset the
// AppWrapper (status.retries).
func (w *AppWrapperWrapper) Retries(n int32) *AppWrapperWrapper {
	w.Status.Retries = n
	return w
}

// ComponentStatus sets status.componentStatus to components of these
// names, in the order of spec.components, as the AppWrapper controller
// reports them once it has created them (a generateName's name is known
// only there).
func (w *AppWrapperWrapper) ComponentStatus(names ...string) *AppWrapperWrapper {
	w.Status.ComponentStatus = nil
	for _, n := range names {
		w.Status.ComponentStatus = append(w.Status.ComponentStatus, awv1beta2.AppWrapperComponentStatus{Name: n})
	}
	return w
}

// ManagedBy sets spec.managedBy (MultiKueue's controller name for an
// AppWrapper that MultiKueue dispatches to a worker).
func (w *AppWrapperWrapper) ManagedBy(controller string) *AppWrapperWrapper {
	w.Spec.ManagedBy = ptr.To(controller)
	return w
}

// Creation sets the creation timestamp, as the API server would.
func (w *AppWrapperWrapper) Creation(at time.Time) *AppWrapperWrapper {
	w.CreationTimestamp = metav1.NewTime(at)
	return w
}

// DeletionTimestamp sets the deletion timestamp, as the API server does on
// a delete that finalizers hold.
func (w *AppWrapperWrapper) DeletionTimestamp(at time.Time) *AppWrapperWrapper {
	w.AppWrapper.DeletionTimestamp = ptr.To(metav1.NewTime(at))
	return w
}

// Finalizers sets the finalizers.
func (w *AppWrapperWrapper) Finalizers(fs ...string) *AppWrapperWrapper {
	w.AppWrapper.Finalizers = fs
	return w
}

// Obj returns the built AppWrapper.
func (w *AppWrapperWrapper) Obj() *awv1beta2.AppWrapper { return &w.AppWrapper }

// MakeBenchmarkAppWrapper starts an llm-d style benchmark AppWrapper,
// suspended in Kueue's LocalQueue queue: two inference Deployments, a
// ConfigMap and the benchmark Job NAME-guidellm (the trigger), labelled
// llm-d.ai/role=benchmark.
func MakeBenchmarkAppWrapper(name, ns, queue string) *AppWrapperWrapper {
	return MakeAppWrapper(name, ns).
		Label("llm-d.ai/role", "benchmark").
		Label(QueueNameLabel, queue).
		Suspend(true).
		Component(MakeDeployment(name+"-prefill", 1), nil).
		Component(MakeDeployment(name+"-decode", 1), nil).
		Component(MakeConfigMap(name+"-config", map[string]string{"rate": "sweep"}), nil).
		Component(MakeJob(name+"-guidellm").Obj(), nil)
}

func podSpec() corev1.PodSpec {
	return corev1.PodSpec{
		RestartPolicy:                 corev1.RestartPolicyNever,
		TerminationGracePeriodSeconds: ptr.To[int64](0),
		Containers: []corev1.Container{{
			Name:  "main",
			Image: "registry.invalid/wrapup/test:1",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("100m"),
			}},
		}},
	}
}

// JobWrapper builds batch/v1 Jobs for tests.
type JobWrapper struct{ batchv1.Job }

// MakeJob starts a one-pod Job.
func MakeJob(name string) *JobWrapper {
	return &JobWrapper{batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: batchv1.JobSpec{
			Parallelism:  ptr.To[int32](1),
			Completions:  ptr.To[int32](1),
			BackoffLimit: ptr.To[int32](0),
			Template:     corev1.PodTemplateSpec{Spec: podSpec()},
		},
	}}
}

// Parallelism sets the Job's parallelism and completions.
func (w *JobWrapper) Parallelism(n int32) *JobWrapper {
	w.Spec.Parallelism, w.Spec.Completions = ptr.To(n), ptr.To(n)
	return w
}

// OwnedBy makes the Job a component of aw, as the AppWrapper controller
// creates one: in its namespace, with its label and its controller
// reference.
func (w *JobWrapper) OwnedBy(aw *awv1beta2.AppWrapper) *JobWrapper {
	w.Namespace = aw.Namespace
	if w.Labels == nil {
		w.Labels = map[string]string{}
	}
	w.Labels[awv1beta2.AppWrapperLabel] = aw.Name
	w.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(aw, awv1beta2.GroupVersion.WithKind("AppWrapper"))}
	return w
}

// UID sets the Job's UID, as the API server would.
func (w *JobWrapper) UID(uid types.UID) *JobWrapper {
	w.Job.UID = uid
	return w
}

// Started gives the Job the status the Job controller writes once its
// pods run, started at at.
func (w *JobWrapper) Started(at time.Time) *JobWrapper {
	startJob(&w.Job, metav1.NewTime(at))
	return w
}

// Complete gives the Job the status the Job controller writes when it
// succeeds at at.
func (w *JobWrapper) Complete(at time.Time) *JobWrapper {
	completeJob(&w.Job, metav1.NewTime(at))
	return w
}

// Failed gives the Job the status the Job controller writes when it fails
// at at (backoff limit exceeded).
func (w *JobWrapper) Failed(at time.Time) *JobWrapper {
	failJob(&w.Job, metav1.NewTime(at))
	return w
}

// Deleting marks the Job as being deleted since at, with the default
// grace period, as the API server does on a delete that finalizers or
// graceful termination hold.
func (w *JobWrapper) Deleting(at time.Time) *JobWrapper {
	w.DeletionTimestamp = ptr.To(metav1.NewTime(at))
	w.DeletionGracePeriodSeconds = ptr.To[int64](30)
	return w
}

// Obj returns the built Job.
func (w *JobWrapper) Obj() *batchv1.Job { return &w.Job }

// MakeDeployment returns a Deployment (an inference server that never finishes).
func MakeDeployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	spec := podSpec()
	spec.RestartPolicy = corev1.RestartPolicyAlways
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       spec,
			},
		},
	}
}

// MakeConfigMap returns a ConfigMap component.
func MakeConfigMap(name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Data:       data,
	}
}

// RuleWrapper builds CompletionRules for tests.
type RuleWrapper struct{ wrapupv1alpha1.CompletionRule }

// MakeRule starts a rule that applies to every AppWrapper and uses the
// annotated component as the trigger.
func MakeRule(name string) *RuleWrapper {
	return &RuleWrapper{wrapupv1alpha1.CompletionRule{
		TypeMeta:   metav1.TypeMeta{APIVersion: wrapupv1alpha1.GroupVersion.String(), Kind: "CompletionRule"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
	}}
}

// TriggerKind sets the trigger's group, kind and (optional) name.
func (w *RuleWrapper) TriggerKind(group, kind, name string) *RuleWrapper {
	w.Spec.Trigger = wrapupv1alpha1.TriggerSpec{APIGroup: group, Kind: kind, Name: name}
	return w
}

// AppWrapperLabels selects AppWrappers by labels.
func (w *RuleWrapper) AppWrapperLabels(labels map[string]string) *RuleWrapper {
	w.Spec.AppWrapperSelector = &metav1.LabelSelector{MatchLabels: labels}
	return w
}

// NamespaceLabels selects namespaces by labels.
func (w *RuleWrapper) NamespaceLabels(labels map[string]string) *RuleWrapper {
	w.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: labels}
	return w
}

// Priority sets the rule's priority.
func (w *RuleWrapper) Priority(p int32) *RuleWrapper {
	w.Spec.Priority = p
	return w
}

// Success sets the success expression.
func (w *RuleWrapper) Success(expr string) *RuleWrapper {
	w.Spec.Success = expr
	return w
}

// Failure sets the failure expression.
func (w *RuleWrapper) Failure(expr string) *RuleWrapper {
	w.Spec.Failure = expr
	return w
}

// Message sets the message expression.
func (w *RuleWrapper) Message(expr string) *RuleWrapper {
	w.Spec.Message = expr
	return w
}

// Variable appends a variable.
func (w *RuleWrapper) Variable(name, expr string) *RuleWrapper {
	w.Spec.Variables = append(w.Spec.Variables, wrapupv1alpha1.Variable{Name: name, Expression: expr})
	return w
}

// OnSuccess sets the success action and TTL.
func (w *RuleWrapper) OnSuccess(a wrapupv1alpha1.Action, ttl int32) *RuleWrapper {
	w.Spec.OnSuccess = wrapupv1alpha1.ActionSpec{Action: a, TTLSecondsAfterFinished: ptr.To(ttl)}
	return w
}

// OnFailure sets the failure action and TTL.
func (w *RuleWrapper) OnFailure(a wrapupv1alpha1.Action, ttl int32) *RuleWrapper {
	w.Spec.OnFailure = wrapupv1alpha1.ActionSpec{Action: a, TTLSecondsAfterFinished: ptr.To(ttl)}
	return w
}

// DryRun sets dryRun.
func (w *RuleWrapper) DryRun() *RuleWrapper {
	w.Spec.DryRun = true
	return w
}

// History sets how the rule keeps the records of its runs.
func (w *RuleWrapper) History(h wrapupv1alpha1.HistorySpec) *RuleWrapper {
	w.Spec.History = h
	return w
}

// Obj returns the built rule.
func (w *RuleWrapper) Obj() *wrapupv1alpha1.CompletionRule { return &w.CompletionRule }

// Policy sets the trigger policy (One, All, Any).
func (w *RuleWrapper) Policy(p wrapupv1alpha1.TriggerPolicy) *RuleWrapper {
	w.Spec.Trigger.Policy = p
	return w
}

// AppWrapperSelector sets the AppWrapper selector as given, which may be
// one the API server would refuse.
func (w *RuleWrapper) AppWrapperSelector(sel *metav1.LabelSelector) *RuleWrapper {
	w.Spec.AppWrapperSelector = sel
	return w
}

// NamespaceSelector sets the namespace selector as given, which may be one
// the API server would refuse.
func (w *RuleWrapper) NamespaceSelector(sel *metav1.LabelSelector) *RuleWrapper {
	w.Spec.NamespaceSelector = sel
	return w
}

// UID sets the rule's UID, as the API server would.
func (w *RuleWrapper) UID(uid types.UID) *RuleWrapper {
	w.CompletionRule.UID = uid
	return w
}

// Generation sets the rule's generation, as the API server counts edits of
// its spec.
func (w *RuleWrapper) Generation(g int64) *RuleWrapper {
	w.CompletionRule.Generation = g
	return w
}

// Creation sets the creation timestamp, as the API server would.
func (w *RuleWrapper) Creation(at time.Time) *RuleWrapper {
	w.CreationTimestamp = metav1.NewTime(at)
	return w
}

// DeletionTimestamp sets the deletion timestamp, as the API server does on
// a delete that finalizers hold.
func (w *RuleWrapper) DeletionTimestamp(at time.Time) *RuleWrapper {
	w.CompletionRule.DeletionTimestamp = ptr.To(metav1.NewTime(at))
	return w
}

// Finalizers sets the finalizers.
func (w *RuleWrapper) Finalizers(fs ...string) *RuleWrapper {
	w.CompletionRule.Finalizers = fs
	return w
}

// ObjectWrapper builds objects of any kind, unstructured: a component's
// template, or a live object of a kind with no typed builder here.
type ObjectWrapper struct{ unstructured.Unstructured }

// MakeObject starts an object of apiVersion and kind (either may be empty,
// and is then left out) named name, or, when name is empty, with the
// generateName "gen-".
func MakeObject(apiVersion, kind, name string) *ObjectWrapper {
	meta := map[string]any{}
	if name != "" {
		meta["name"] = name
	} else {
		meta["generateName"] = "gen-"
	}
	obj := map[string]any{"metadata": meta}
	if apiVersion != "" {
		obj["apiVersion"] = apiVersion
	}
	if kind != "" {
		obj["kind"] = kind
	}
	return &ObjectWrapper{unstructured.Unstructured{Object: obj}}
}

// GenerateName names the object by a prefix the API server completes
// (metadata.generateName), instead of a name.
func (w *ObjectWrapper) GenerateName(prefix string) *ObjectWrapper {
	md, _ := w.Object["metadata"].(map[string]any)
	delete(md, "name")
	md["generateName"] = prefix
	return w
}

// Annotation sets an annotation on the object's metadata.
func (w *ObjectWrapper) Annotation(k, v string) *ObjectWrapper {
	ann := w.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[k] = v
	w.SetAnnotations(ann)
	return w
}

// Status sets the object's status, as its controller writes it.
func (w *ObjectWrapper) Status(status map[string]any) *ObjectWrapper {
	w.Object["status"] = status
	return w
}

// OwnedBy makes the object a component of aw, as the AppWrapper controller
// creates one: in its namespace, with its label and its controller
// reference.
func (w *ObjectWrapper) OwnedBy(aw *awv1beta2.AppWrapper) *ObjectWrapper {
	w.SetNamespace(aw.Namespace)
	labels := w.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[awv1beta2.AppWrapperLabel] = aw.Name
	w.SetLabels(labels)
	w.SetOwnerReferences([]metav1.OwnerReference{*metav1.NewControllerRef(aw, awv1beta2.GroupVersion.WithKind("AppWrapper"))})
	return w
}

// UID sets the object's UID, as the API server would.
func (w *ObjectWrapper) UID(uid types.UID) *ObjectWrapper {
	w.SetUID(uid)
	return w
}

// Deleting marks the object as being deleted since at, with the default
// grace period, as the API server does on a delete that finalizers or
// graceful termination hold.
func (w *ObjectWrapper) Deleting(at time.Time) *ObjectWrapper {
	ts := metav1.NewTime(at)
	w.SetDeletionTimestamp(&ts)
	w.SetDeletionGracePeriodSeconds(ptr.To[int64](30))
	return w
}

// Obj returns the built object.
func (w *ObjectWrapper) Obj() *unstructured.Unstructured { return &w.Unstructured }

// Unstructured returns obj, typed, as an unstructured object (as a
// dynamic informer caches it).
func Unstructured(obj runtime.Object) *unstructured.Unstructured {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		panic(err)
	}
	return &unstructured.Unstructured{Object: m}
}

// NamespaceWrapper builds Namespaces for tests.
type NamespaceWrapper struct{ corev1.Namespace }

// MakeNamespace starts a Namespace.
func MakeNamespace(name string) *NamespaceWrapper {
	return &NamespaceWrapper{corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}}
}

// Label sets a label on the Namespace.
func (w *NamespaceWrapper) Label(k, v string) *NamespaceWrapper {
	if w.Labels == nil {
		w.Labels = map[string]string{}
	}
	w.Labels[k] = v
	return w
}

// Obj returns the built Namespace.
func (w *NamespaceWrapper) Obj() *corev1.Namespace { return &w.Namespace }

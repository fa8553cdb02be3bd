package integration

import (
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/cmd/kubectl-wrapup/view"
	"github.com/wrapup-dev/wrapup/gc/decision"
	"github.com/wrapup-dev/wrapup/test/util"
)

// podTemplate is a pod template as unstructured content.
func podTemplate() map[string]any {
	return map[string]any{"spec": map[string]any{
		"restartPolicy": "Never",
		"containers":    []any{map[string]any{"name": "main", "image": "registry.invalid/wrapup/test:1"}},
	}}
}

func object(apiVersion, kind, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"name": name},
		"spec":     spec,
	}}
}

// pyTorchJob is a PyTorchJob of one master, as unstructured content.
func pyTorchJob() *unstructured.Unstructured {
	return object("kubeflow.org/v1", "PyTorchJob", "train", map[string]any{
		"pytorchReplicaSpecs": map[string]any{"Master": map[string]any{
			"replicas": int64(1), "restartPolicy": "OnFailure",
			"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "pytorch", "image": "registry.invalid/wrapup/test:1"}}}},
		}},
	})
}

// pyTorchJobSucceeded writes the status the training operator writes when
// a PyTorchJob succeeds.
func pyTorchJobSucceeded(u *unstructured.Unstructured) {
	Expect(unstructured.SetNestedSlice(u.Object, []any{condition("Created"), condition("Running"), condition("Succeeded")}, "status", "conditions")).To(Succeed())
	Expect(unstructured.SetNestedField(u.Object, map[string]any{}, "status", "replicaStatuses")).To(Succeed())
}

func condition(t string) map[string]any {
	return map[string]any{"type": t, "status": "True", "reason": t, "message": t,
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339), "lastUpdateTime": time.Now().UTC().Format(time.RFC3339)}
}

var _ = Describe("Trigger kinds", func() {
	var ns *corev1.Namespace
	BeforeEach(func() { ns = specNamespace("kinds") })

	// finishes runs the scenario for one kind: an AppWrapper wrapping an
	// inference Deployment and trigger; the test writes the status the
	// kind's operator writes when it finishes; the AppWrapper goes.
	finishes := func(trigger *unstructured.Unstructured, finish func(u *unstructured.Unstructured)) {
		GinkgoHelper()
		aw := util.MakeAppWrapper("run", ns.Name).
			Component(util.MakeDeployment("inference", 1), nil).
			Component(trigger, nil).Obj()
		createRunning(aw)

		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(trigger.GroupVersionKind())
		key := types.NamespacedName{Namespace: ns.Name, Name: trigger.GetName()}
		Eventually(func() error { return k8sClient.Get(ctx, key, live) }, util.Timeout, util.Interval).Should(Succeed())
		expectKept(aw, time.Second)

		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, key, live)).To(Succeed())
			finish(live)
			g.Expect(k8sClient.Status().Update(ctx, live)).To(Succeed())
		}, util.Timeout, util.Interval).Should(Succeed())
		expectEvent(aw, "", "TriggerSucceeded", "")
		util.ExpectGone(ctx, k8sClient, aw, util.LongTimeout)
		util.ExpectGone(ctx, k8sClient, live, util.LongTimeout)
	}

	It("finishes every kind with one rule per kind at one priority, and annotated-triggers for the rest", func() {
		skipWithoutJobSet()
		// What admins write first (docs/writing-rules.md, "One rule per
		// kind"): no selectors but the spec's namespace, one priority.
		createReadyRule(ns, util.MakeRule("jobs").TriggerKind("batch", "Job", "").Priority(10))
		createReadyRule(ns, util.MakeRule("jobsets").TriggerKind("jobset.x-k8s.io", "JobSet", "").Priority(10))
		createReadyRule(ns, util.MakeRule("pytorchjobs").TriggerKind("kubeflow.org", "PyTorchJob", "").Priority(10))
		createReadyRule(ns, util.MakeRule("annotated-triggers").Priority(-1000))
		jobset := object("jobset.x-k8s.io/v1alpha2", "JobSet", "train", map[string]any{
			"replicatedJobs": []any{map[string]any{"name": "workers", "replicas": int64(1), "template": map[string]any{
				"spec": map[string]any{"parallelism": int64(1), "completions": int64(1), "template": podTemplate()},
			}}},
		})
		pytorch := pyTorchJob()
		rayjob := object("ray.io/v1", "RayJob", "tune", map[string]any{
			"entrypoint": "python tune.py",
			"rayClusterSpec": map[string]any{"headGroupSpec": map[string]any{"rayStartParams": map[string]any{}, "template": map[string]any{"spec": map[string]any{
				"containers": []any{map[string]any{"name": "ray-head", "image": "registry.invalid/wrapup/ray:1"}},
			}}}},
		})
		job := &unstructured.Unstructured{}
		raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(util.MakeJob("bench").Obj())
		Expect(err).NotTo(HaveOccurred())
		job.Object = raw
		job.SetAPIVersion("batch/v1")
		job.SetKind("Job")
		runs := []struct {
			name, rule string
			trigger    *unstructured.Unstructured
			annotated  bool
			finish     func(u *unstructured.Unstructured)
		}{
			{"with-job", "jobs", job, false, func(u *unstructured.Unstructured) {
				Expect(unstructured.SetNestedSlice(u.Object, []any{condition("SuccessCriteriaMet"), condition("Complete")}, "status", "conditions")).To(Succeed())
				Expect(unstructured.SetNestedField(u.Object, time.Now().UTC().Format(time.RFC3339), "status", "startTime")).To(Succeed())
				Expect(unstructured.SetNestedField(u.Object, time.Now().UTC().Format(time.RFC3339), "status", "completionTime")).To(Succeed())
				Expect(unstructured.SetNestedField(u.Object, int64(1), "status", "succeeded")).To(Succeed())
			}},
			{"with-jobset", "jobsets", jobset, false, func(u *unstructured.Unstructured) {
				Expect(unstructured.SetNestedSlice(u.Object, []any{condition("Completed")}, "status", "conditions")).To(Succeed())
			}},
			{"with-pytorchjob", "pytorchjobs", pytorch, false, pyTorchJobSucceeded},
			{"with-rayjob", "annotated-triggers", rayjob, true, func(u *unstructured.Unstructured) {
				Expect(unstructured.SetNestedField(u.Object, "Complete", "status", "jobDeploymentStatus")).To(Succeed())
				Expect(unstructured.SetNestedField(u.Object, "SUCCEEDED", "status", "jobStatus")).To(Succeed())
			}},
		}
		var aws []*awv1beta2.AppWrapper
		for _, r := range runs {
			t := r.trigger.DeepCopy()
			t.SetName(r.name + "-" + t.GetName())
			var ann map[string]string
			if r.annotated {
				ann = map[string]string{wrapupv1alpha1.TriggerAnnotation: "true"}
			}
			aw := util.MakeAppWrapper(r.name, ns.Name).
				Component(util.MakeDeployment(r.name+"-inference", 1), nil).
				Component(t, ann).Obj()
			Expect(k8sClient.Create(ctx, aw)).To(Succeed())
			aws = append(aws, aw)
		}
		for i, r := range runs {
			aw := aws[i]
			util.ExpectAppWrapperPhase(ctx, k8sClient, client.ObjectKeyFromObject(aw), awv1beta2.AppWrapperRunning)
			live := &unstructured.Unstructured{}
			live.SetGroupVersionKind(r.trigger.GroupVersionKind())
			key := types.NamespacedName{Namespace: ns.Name, Name: r.name + "-" + r.trigger.GetName()}
			Eventually(func(g Gomega) {
				g.Expect(k8sClient.Get(ctx, key, live)).To(Succeed())
				r.finish(live)
				g.Expect(k8sClient.Status().Update(ctx, live)).To(Succeed())
			}, util.Timeout, util.Interval).Should(Succeed())
		}
		for i, r := range runs {
			expectEvent(aws[i], "", "TriggerSucceeded", "rule "+ns.Name+"-"+r.rule)
			util.ExpectGone(ctx, k8sClient, aws[i], util.LongTimeout)
		}
	})

	It("blocks, with both selectors broken, only the AppWrappers a broken rule would apply to", func() {
		// Fail closed where the rule applies (its kind), and only there: a
		// broken Job rule holds Job AppWrappers in every namespace, never a
		// PyTorchJob one.
		bad := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpIn}}}
		broken := util.MakeRule(ns.Name+"-broken").TriggerKind("batch", "Job", "").Priority(10).AppWrapperSelector(bad).NamespaceSelector(bad.DeepCopy()).Obj()
		createSpecRule(broken)
		expectRuleReady(broken, metav1.ConditionFalse, wrapupv1alpha1.ReasonInvalidSelector)
		createReadyRule(ns, util.MakeRule("jobs").TriggerKind("batch", "Job", ""))
		createReadyRule(ns, util.MakeRule("pytorchjobs").TriggerKind("kubeflow.org", "PyTorchJob", ""))

		jobAW := util.MakeAppWrapper("held", ns.Name).Component(util.MakeJob("bench").Obj(), nil).Obj()
		job := runJob(jobAW, "bench")
		util.JobComplete(ctx, k8sClient, job)

		finishes(pyTorchJob(), pyTorchJobSucceeded)

		expectEvent(jobAW, "", wrapupv1alpha1.ReasonBlockedByRule, "its appWrapperSelector does not parse")
		Consistently(func(g Gomega) {
			got := &awv1beta2.AppWrapper{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(jobAW), got)).To(Succeed(), "a lower rule deleted what the broken rule holds")
			g.Expect(got.Labels).NotTo(HaveKey(wrapupv1alpha1.OutcomeLabel))
			g.Expect(recordedOutcome(g, got)).To(BeEmpty())
		}, util.ConsistentDuration, util.Interval).Should(Succeed())
	})

	It("finishes on a JobSet's Completed condition (built-in)", func() {
		skipWithoutJobSet()
		createReadyRule(ns, util.MakeRule("jobset").TriggerKind("jobset.x-k8s.io", "JobSet", ""))
		finishes(object("jobset.x-k8s.io/v1alpha2", "JobSet", "train", map[string]any{
			"replicatedJobs": []any{map[string]any{"name": "workers", "replicas": int64(1), "template": map[string]any{
				"spec": map[string]any{"parallelism": int64(1), "completions": int64(1), "template": podTemplate()},
			}}},
		}), func(u *unstructured.Unstructured) {
			Expect(unstructured.SetNestedSlice(u.Object, []any{condition("Completed")}, "status", "conditions")).To(Succeed())
		})
	})

	It("finishes on a PyTorchJob's Succeeded condition (built-in)", func() {
		createReadyRule(ns, util.MakeRule("pytorch").TriggerKind("kubeflow.org", "PyTorchJob", ""))
		finishes(pyTorchJob(), pyTorchJobSucceeded)
	})

	It("finishes on a RayJob's SUCCEEDED job status (built-in)", func() {
		createReadyRule(ns, util.MakeRule("rayjob").TriggerKind("ray.io", "RayJob", ""))
		finishes(object("ray.io/v1", "RayJob", "tune", map[string]any{
			"entrypoint": "python tune.py",
			"rayClusterSpec": map[string]any{
				"headGroupSpec": map[string]any{"rayStartParams": map[string]any{}, "template": map[string]any{"spec": map[string]any{
					"containers": []any{map[string]any{"name": "ray-head", "image": "registry.invalid/wrapup/ray:1"}},
				}}},
			},
		}), func(u *unstructured.Unstructured) {
			Expect(unstructured.SetNestedField(u.Object, "Complete", "status", "jobDeploymentStatus")).To(Succeed())
			Expect(unstructured.SetNestedField(u.Object, "SUCCEEDED", "status", "jobStatus")).To(Succeed())
		})
	})

	It("finishes a custom kind by the rule's own success expression", func() {
		createReadyRule(ns, util.MakeRule("evalrun").TriggerKind("example.wrapup.dev", "EvalRun", "").
			Variable("phase", "object.status.?phase.orValue('')").
			Success("variables.phase == 'Done'").
			Failure("variables.phase == 'Aborted'").
			Message("string(object.status.?passed.orValue(0)) + ' checks passed'"))
		finishes(object("example.wrapup.dev/v1", "EvalRun", "suite", map[string]any{"suite": "mmlu"}),
			func(u *unstructured.Unstructured) {
				Expect(unstructured.SetNestedField(u.Object, "Done", "status", "phase")).To(Succeed())
				Expect(unstructured.SetNestedField(u.Object, int64(57), "status", "passed")).To(Succeed())
			})
	})

	It("sees the trigger's spec and the AppWrapper's spec and status once a rule is edited to read them, though wrapup's caches dropped them", func() {
		r := createReadyRule(ns, util.MakeRule("evalspec").TriggerKind("example.wrapup.dev", "EvalRun", "").
			Success("object.?status.?phase.orValue('') == 'Done'"))

		aw := util.MakeAppWrapper("run", ns.Name).
			Component(util.MakeDeployment("inference", 1), nil).
			Component(object("example.wrapup.dev/v1", "EvalRun", "suite", map[string]any{"suite": "mmlu"}), nil).Obj()
		createRunning(aw)
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(schema.GroupVersionKind{Group: "example.wrapup.dev", Version: "v1", Kind: "EvalRun"})
		key := types.NamespacedName{Namespace: ns.Name, Name: "suite"}
		Eventually(func() error { return k8sClient.Get(ctx, key, live) }, util.Timeout, util.Interval).Should(Succeed())

		By("editing the rule to read the trigger's spec and the AppWrapper's components")
		Eventually(func(g Gomega) {
			got := &wrapupv1alpha1.CompletionRule{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(r), got)).To(Succeed())
			got.Spec.Success = "object.?status.?phase.orValue('') == 'Done' && object.spec.suite == 'mmlu' && appWrapper.spec.components.size() == 2 && appWrapper.status.componentStatus[1].kind == 'EvalRun'"
			got.Spec.Message = "object.spec.suite + ' done, ' + appWrapper.spec.components[0].template.metadata.name + ' served'"
			g.Expect(k8sClient.Update(ctx, got)).To(Succeed())
		}, util.Timeout, util.Interval).Should(Succeed())
		Eventually(func(g Gomega) {
			got := &wrapupv1alpha1.CompletionRule{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(r), got)).To(Succeed())
			g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		}, util.Timeout, util.Interval).Should(Succeed())

		By("finishing the trigger")
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, key, live)).To(Succeed())
			g.Expect(unstructured.SetNestedField(live.Object, "Done", "status", "phase")).To(Succeed())
			g.Expect(k8sClient.Status().Update(ctx, live)).To(Succeed())
		}, util.Timeout, util.Interval).Should(Succeed())
		// A dropped spec would be a "no such key" error: an
		// EvaluationError Event, and nothing finished.
		expectEvent(aw, "", "TriggerSucceeded", "mmlu done, inference served")
		util.ExpectGone(ctx, k8sClient, aw, util.LongTimeout)
		Expect(countEvents(aw, wrapupv1alpha1.ReasonEvaluationError)).To(BeZero())
	})

	It("sees the AppWrapper's annotations in a rule that reads them, though wrapup's cache keeps only those it reads itself", func() {
		createReadyRule(ns, util.MakeRule("evalmeta").TriggerKind("example.wrapup.dev", "EvalRun", "").
			Success("object.?status.?phase.orValue('') == 'Done'").
			Message("'run ' + appWrapper.metadata.annotations['team.example.com/run'] + ' of ' + appWrapper.metadata.labels['team']"))
		aw := util.MakeAppWrapper("annotated", ns.Name).Label("team", "evals").Annotation("team.example.com/run", "r42").
			Component(util.MakeDeployment("inference", 1), nil).
			Component(object("example.wrapup.dev/v1", "EvalRun", "meta", map[string]any{"suite": "mmlu"}), nil).Obj()
		createRunning(aw)
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(schema.GroupVersionKind{Group: "example.wrapup.dev", Version: "v1", Kind: "EvalRun"})
		key := types.NamespacedName{Namespace: ns.Name, Name: "meta"}
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, key, live)).To(Succeed())
			g.Expect(unstructured.SetNestedField(live.Object, "Done", "status", "phase")).To(Succeed())
			g.Expect(k8sClient.Status().Update(ctx, live)).To(Succeed())
		}, util.Timeout, util.Interval).Should(Succeed())
		// An annotation missing from what the rule is given would be a "no
		// such key" error: an EvaluationError Event, and nothing finished.
		expectEvent(aw, "", "TriggerSucceeded", "run r42 of evals")
		util.ExpectGone(ctx, k8sClient, aw, util.LongTimeout)
		Expect(countEvents(aw, wrapupv1alpha1.ReasonEvaluationError)).To(BeZero())
	})

	It("says on a rule whose trigger kind has no status subresource that whoever may update one can finish its AppWrapper", func() {
		open := util.MakeRule("open").TriggerKind("example.wrapup.dev", "OpenRun", "").Success("object.?status.?phase.orValue('') == 'Done'").Obj()
		open.Name = ns.Name + "-open"
		open.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{nsLabel: ns.Name}}
		createSpecRule(open)
		guarded := util.MakeRule("guarded").TriggerKind("example.wrapup.dev", "EvalRun", "").Success("object.?status.?phase.orValue('') == 'Done'").Obj()
		guarded.Name = ns.Name + "-guarded"
		guarded.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{nsLabel: ns.Name}}
		createSpecRule(guarded)
		expectRuleReady(open, metav1.ConditionTrue, wrapupv1alpha1.ReasonCompiled)
		expectRuleReady(guarded, metav1.ConditionTrue, wrapupv1alpha1.ReasonCompiled)
		Eventually(func(g Gomega) {
			got := &wrapupv1alpha1.CompletionRule{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(open), got)).To(Succeed())
			c := apimeta.FindStatusCondition(got.Status.Conditions, wrapupv1alpha1.ConditionTriggerStatusProtected)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(wrapupv1alpha1.ReasonNoStatusSubresource))
			g.Expect(c.Message).To(ContainSubstring("OpenRun.example.wrapup.dev"))
		}, util.Timeout, util.Interval).Should(Succeed())
		expectEvent(open, "", wrapupv1alpha1.ReasonNoStatusSubresource, "no status subresource")
		got := &wrapupv1alpha1.CompletionRule{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(guarded), got)).To(Succeed())
		Expect(apimeta.FindStatusCondition(got.Status.Conditions, wrapupv1alpha1.ConditionTriggerStatusProtected)).To(BeNil(), "EvalRun has a status subresource")
	})

	It("starts working when the trigger kind's CRD is installed after the rule, and stops its informer when the rule goes", func() {
		gk := schema.GroupKind{Group: "late.wrapup.dev", Kind: "LateRun"}
		r := util.MakeRule("late").TriggerKind(gk.Group, gk.Kind, "").Success("object.status.?phase.orValue('') == 'Done'").Obj()
		r.Name = ns.Name + "-late"
		r.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{nsLabel: ns.Name}}
		createSpecRule(r)
		expectRuleReady(r, metav1.ConditionFalse, wrapupv1alpha1.ReasonTriggerKindNotFound)
		Expect(informerRunning(gk)).To(BeFalse())

		By("installing the CRD")
		installLateCRDs()
		DeferCleanup(uninstallLateCRDs)
		expectRuleReady(r, metav1.ConditionTrue, wrapupv1alpha1.ReasonCompiled)
		Expect(informerRunning(gk)).To(BeTrue())

		finishes(object("late.wrapup.dev/v1", "LateRun", "late", map[string]any{"suite": "x"}), func(u *unstructured.Unstructured) {
			Expect(unstructured.SetNestedField(u.Object, "Done", "status", "phase")).To(Succeed())
		})

		By("deleting the last rule for the kind")
		Expect(k8sClient.Delete(ctx, r)).To(Succeed())
		Eventually(func() bool { return informerRunning(gk) }, util.Timeout, util.Interval).Should(BeFalse())
	})

	It("never takes an object the AppWrapper does not own as its trigger", func() {
		createReadyRule(ns, util.MakeRule("owned").TriggerKind("batch", "Job", ""))
		By("someone creating, ahead of the AppWrapper, a Job with the trigger's name and the AppWrapper's label")
		impostor := util.MakeJob("bench").Obj()
		impostor.Namespace = ns.Name
		impostor.Labels = map[string]string{awv1beta2.AppWrapperLabel: "victim"}
		Expect(k8sClient.Create(ctx, impostor)).To(Succeed())

		// Suspended (queued): its controller creates nothing, so the only
		// "bench" Job there is the impostor.
		aw := util.MakeAppWrapper("victim", ns.Name).Suspend(true).
			Component(util.MakeDeployment("inference", 1), nil).
			Component(util.MakeJob("bench").Obj(), nil).Obj()
		Expect(k8sClient.Create(ctx, aw)).To(Succeed())
		util.JobComplete(ctx, k8sClient, client.ObjectKeyFromObject(impostor))
		// A suspended AppWrapper has no components: nothing is read for it.
		Eventually(func(g Gomega) {
			ex, err := view.Explain(ctx, k8sClient, nil, client.ObjectKeyFromObject(aw), time.Now())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ex.Verdict).To(Equal(decision.VerdictWaitingForTrigger), ex.String())
			g.Expect(ex.Trigger).NotTo(BeNil())
			g.Expect(ex.Trigger.Problem).To(ContainSubstring("its components do not exist"))
		}, util.Timeout, util.Interval).Should(Succeed())
		expectNotRecorded(aw)
	})
})

var lateCRDs = envtest.CRDInstallOptions{Paths: []string{filepath.Join("testdata", "late-crds")}, ErrorIfPathMissing: true}

// installLateCRDs installs the CRD of the LateRun kind, which specs install
// and remove while wrapup runs.
func installLateCRDs() {
	GinkgoHelper()
	_, err := envtest.InstallCRDs(cfg, lateCRDs)
	Expect(err).NotTo(HaveOccurred())
}

// uninstallLateCRDs removes it and waits until it is gone.
func uninstallLateCRDs() {
	GinkgoHelper()
	Expect(envtest.UninstallCRDs(cfg, lateCRDs)).To(Succeed())
	Eventually(func() bool {
		err := k8sClient.Get(ctx, types.NamespacedName{Name: "lateruns.late.wrapup.dev"}, &apiextensionsv1.CustomResourceDefinition{})
		return apierrors.IsNotFound(err)
	}, util.LongTimeout, util.Interval).Should(BeTrue())
}

// informerRunning reads the wrapup_trigger_informers metric for a kind.
func informerRunning(gk schema.GroupKind) bool {
	GinkgoHelper()
	families, err := metrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != "wrapup_trigger_informers" {
			continue
		}
		for _, m := range f.GetMetric() {
			if labelValue(m, "kind") == gk.String() && m.GetGauge().GetValue() == 1 {
				return true
			}
		}
	}
	return false
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

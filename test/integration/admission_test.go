package integration

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/gc"
	"github.com/wrapup-dev/wrapup/test/framework"
	"github.com/wrapup-dev/wrapup/test/util"
)

// refusedByPolicy is what the records' ValidatingAdmissionPolicy says when
// it refuses a write (config/admission/policy.yaml).
const refusedByPolicy = "only wrapup writes CompletionRecords"

// The ValidatingAdmissionPolicy of config/admission, as the install ships
// it: only wrapup's ServiceAccount writes CompletionRecords; cluster admins
// (system:masters) may too, and Kubernetes' garbage collector and namespace
// controller may delete them. A namespace owner whose Role grants * on *
// may read them, and write anything else, but not them.
//
// The suite's kube-controller-manager runs the garbage collector, as a
// member of system:masters, and not the namespace controller (a namespace
// deleted in this suite stays Terminating): the users those run as in a
// cluster are impersonated instead, and namespace deletion is not shown.
var _ = Describe("CompletionRecord writers (admission policy)", Ordered, func() {
	BeforeAll(func() {
		policy, binding := recordWritersPolicy()
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())
		Expect(k8sClient.Create(ctx, binding)).To(Succeed())
		// The rest of the suite runs without it, as before.
		DeferCleanup(func() {
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, binding))).To(Succeed())
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, policy))).To(Succeed())
		})
	})

	var ns *corev1.Namespace
	BeforeEach(func() { ns = specNamespace("admission") })

	It("refuses a namespace owner's writes, and lets them read the records and write anything else", func() {
		owner := userInNamespace(ns.Name, "owner", rbacv1.PolicyRule{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}})
		expectEnforced(owner, ns.Name)

		By("an admin (system:masters) creating a record")
		rec := makeRecord(ns.Name, "run1")
		Expect(k8sClient.Create(ctx, rec)).To(Succeed())

		By("the owner creating, updating, patching and deleting records: each refused by the policy")
		expectRefused(owner.Create(ctx, makeRecord(ns.Name, "forged")), "owner", "create")
		got := &wrapupv1alpha1.CompletionRecord{}
		Expect(owner.Get(ctx, client.ObjectKeyFromObject(rec), got)).To(Succeed())
		got.Outcome = wrapupv1alpha1.OutcomeFailed
		expectRefused(owner.Update(ctx, got), "owner", "update")
		Expect(owner.Get(ctx, client.ObjectKeyFromObject(rec), got)).To(Succeed())
		patch := client.MergeFrom(got.DeepCopy())
		got.Retention.TTLSecondsAfterFinished = 0
		expectRefused(owner.Patch(ctx, got, patch), "owner", "update")
		expectRefused(owner.Delete(ctx, got), "owner", "delete")
		Expect(owner.DeleteAllOf(ctx, &wrapupv1alpha1.CompletionRecord{}, client.InNamespace(ns.Name))).NotTo(Succeed(), "deletecollection")

		By("the owner reading the record, unchanged")
		Expect(owner.Get(ctx, client.ObjectKeyFromObject(rec), got)).To(Succeed())
		Expect(got.Outcome).To(Equal(wrapupv1alpha1.OutcomeSucceeded))
		Expect(got.Retention.TTLSecondsAfterFinished).To(Equal(rec.Retention.TTLSecondsAfterFinished))
		Expect(got.ResourceVersion).To(Equal(rec.ResourceVersion))
		var list wrapupv1alpha1.CompletionRecordList
		Expect(owner.List(ctx, &list, client.InNamespace(ns.Name))).To(Succeed())
		Expect(list.Items).To(ConsistOf(HaveField("Name", "run1")))

		By("the owner's Role working for anything else: a ConfigMap created and deleted")
		cm := util.MakeConfigMap("owned", map[string]string{"k": "v"})
		cm.Namespace = ns.Name
		Expect(owner.Create(ctx, cm)).To(Succeed())
		Expect(owner.Delete(ctx, cm)).To(Succeed())

		By("the admin deleting the record")
		Expect(k8sClient.Delete(ctx, rec)).To(Succeed())
		Expect(apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(rec), got))).To(BeTrue())
	})

	It("lets wrapup's ServiceAccount write records, and no other ServiceAccount", func() {
		By("another ServiceAccount, as free with records as wrapup's, refused")
		other := userInNamespace(ns.Name, "system:serviceaccount:"+ns.Name+"-other:wrapup-controller",
			rbacv1.PolicyRule{APIGroups: []string{wrapupv1alpha1.GroupVersion.Group}, Resources: []string{"completionrecords"}, Verbs: []string{"*"}})
		expectEnforced(other, ns.Name)

		By("wrapup's ServiceAccount, with its install's RBAC, creating, updating and deleting one")
		// The suite's wrapup runs as wrapupCfg's user: the policy names it.
		wrapupClient, err := client.New(wrapupCfg, client.Options{Scheme: framework.Scheme})
		Expect(err).NotTo(HaveOccurred())
		rec := makeRecord(ns.Name, "run1")
		Expect(wrapupClient.Create(ctx, rec)).To(Succeed())
		rec.Message = "replaced by a later run"
		Expect(wrapupClient.Update(ctx, rec)).To(Succeed())
		Expect(wrapupClient.Delete(ctx, rec)).To(Succeed())
	})

	It("lets the running wrapup record a run", func() {
		createReadyRule(ns, util.MakeRule("bench").TriggerKind("batch", "Job", ""))
		aw := util.MakeAppWrapper("run1", ns.Name).
			Component(util.MakeConfigMap("run1-config", nil), nil).
			Component(util.MakeJob("run1-bench").Obj(), nil).Obj()
		job := runJob(aw, "run1-bench")
		util.JobComplete(ctx, k8sClient, job)
		util.ExpectGone(ctx, k8sClient, aw, util.LongTimeout)
		cr := &wrapupv1alpha1.CompletionRecord{}
		Eventually(func() error {
			return k8sClient.Get(ctx, types.NamespacedName{Namespace: ns.Name, Name: gc.RecordName(aw.Name, string(aw.UID))}, cr)
		}, util.Timeout, util.Interval).Should(Succeed())
		Expect(cr.Outcome).To(Equal(wrapupv1alpha1.OutcomeSucceeded))
	})

	It("lets Kubernetes' garbage collector and namespace controller delete records, the collector update them, and neither create one", func() {
		rule := rbacv1.PolicyRule{APIGroups: []string{wrapupv1alpha1.GroupVersion.Group}, Resources: []string{"completionrecords"}, Verbs: []string{"*"}}
		users := map[string]client.Client{}
		for _, name := range []string{
			"system:serviceaccount:kube-system:generic-garbage-collector",
			"system:serviceaccount:kube-system:namespace-controller",
			"system:kube-controller-manager",
		} {
			users[name] = userInNamespace(ns.Name, name, rule)
		}
		for name, c := range users {
			By(name + ": creating refused, deleting let through")
			expectEnforced(c, ns.Name)
			rec := makeRecord(ns.Name, "run1")
			Expect(k8sClient.Create(ctx, rec)).To(Succeed())
			rec.Message = "changed"
			if name == "system:serviceaccount:kube-system:namespace-controller" {
				expectRefused(c.Update(ctx, rec), name, "update")
			} else {
				// The garbage collector orphans a record (removes its
				// ownerReference) when its AppWrapper is deleted with
				// --cascade=orphan.
				Expect(c.Update(ctx, rec)).To(Succeed(), name)
			}
			Expect(c.Delete(ctx, rec)).To(Succeed(), name)
		}

		By("the namespace controller's deletecollection of a namespace's records let through")
		for _, name := range []string{"run1", "run2"} {
			Expect(k8sClient.Create(ctx, makeRecord(ns.Name, name))).To(Succeed())
		}
		Expect(users["system:serviceaccount:kube-system:namespace-controller"].DeleteAllOf(ctx, &wrapupv1alpha1.CompletionRecord{}, client.InNamespace(ns.Name))).To(Succeed())
		var list wrapupv1alpha1.CompletionRecordList
		Expect(k8sClient.List(ctx, &list, client.InNamespace(ns.Name))).To(Succeed())
		Expect(list.Items).To(BeEmpty())

		By("the suite's garbage collector deleting a record whose owner is gone")
		owner := util.MakeConfigMap("owner", nil)
		owner.Namespace = ns.Name
		Expect(k8sClient.Create(ctx, owner)).To(Succeed())
		rec := makeRecord(ns.Name, "owned")
		rec.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}
		Expect(k8sClient.Create(ctx, rec)).To(Succeed())
		Expect(k8sClient.Delete(ctx, owner)).To(Succeed())
		util.ExpectGone(ctx, k8sClient, rec, util.LongTimeout)
	})
})

// recordWritersPolicy reads the ValidatingAdmissionPolicy and its binding
// from config/admission/policy.yaml. The wrapup they let through is the
// suite's: the ServiceAccount wrapupCfg acts as.
func recordWritersPolicy() (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	GinkgoHelper()
	path := filepath.Join(framework.RepoRoot(), "config", "admission", "policy.yaml")
	data, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	decoder := serializer.NewCodecFactory(framework.Scheme, serializer.EnableStrict).UniversalDeserializer()
	var (
		policy  *admissionregistrationv1.ValidatingAdmissionPolicy
		binding *admissionregistrationv1.ValidatingAdmissionPolicyBinding
	)
	docs := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		Expect(err).NotTo(HaveOccurred())
		if strings.TrimSpace(string(doc)) == "" {
			continue
		}
		obj, _, err := decoder.Decode(doc, nil, nil)
		Expect(err).NotTo(HaveOccurred(), path)
		switch o := obj.(type) {
		case *admissionregistrationv1.ValidatingAdmissionPolicy:
			policy = o
		case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
			binding = o
		default:
			Fail("unexpected object in " + path)
		}
	}
	Expect(policy).NotTo(BeNil(), path)
	Expect(binding).NotTo(BeNil(), path)

	suiteUser := wrapupCfg.Impersonate.UserName
	Expect(suiteUser).NotTo(BeEmpty(), "the suite's wrapup authenticates as a ServiceAccount")
	named := false
	for i, c := range policy.Spec.MatchConditions {
		if strings.Contains(c.Expression, "'"+framework.ControllerUser+"'") {
			named = true
			policy.Spec.MatchConditions[i].Expression = strings.ReplaceAll(c.Expression, framework.ControllerUser, suiteUser)
		}
	}
	Expect(named).To(BeTrue(), "the policy's matchConditions do not name wrapup's ServiceAccount %s", framework.ControllerUser)
	return policy, binding
}

// userInNamespace binds user, in namespace, to a Role of rule, and returns
// a client acting as user (impersonated: in groups system:authenticated
// only).
func userInNamespace(namespace, user string, rule rbacv1.PolicyRule) client.Client {
	GinkgoHelper()
	name := "admission-" + string(uuid.NewUUID())[:8]
	Expect(k8sClient.Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Rules:      []rbacv1.PolicyRule{rule},
	})).To(Succeed())
	Expect(k8sClient.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	})).To(Succeed())
	userCfg := rest.CopyConfig(cfg)
	userCfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := client.New(userCfg, client.Options{Scheme: framework.Scheme})
	Expect(err).NotTo(HaveOccurred())
	return c
}

// expectEnforced waits until c's create of a record in namespace is refused
// by the policy: the API server enforces a policy, and RBAC a binding, a
// moment after they are created. A probe that gets through is deleted.
func expectEnforced(c client.Client, namespace string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		probe := makeRecord(namespace, "probe-"+string(uuid.NewUUID())[:8])
		err := c.Create(ctx, probe)
		if err == nil {
			Expect(k8sClient.Delete(ctx, probe)).To(Succeed())
		}
		g.Expect(err).To(HaveOccurred(), "a probe record created")
		g.Expect(err.Error()).To(ContainSubstring(refusedByPolicy))
	}, util.Timeout, util.Interval).Should(Succeed())
}

// expectRefused checks that err is the policy's refusal of user's verb.
func expectRefused(err error, user, verb string) {
	GinkgoHelper()
	Expect(err).To(HaveOccurred(), "%s's %s of a record", user, verb)
	Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s's %s: %v", user, verb, err)
	Expect(err.Error()).To(ContainSubstring(refusedByPolicy))
	Expect(err.Error()).To(ContainSubstring(user + " may not " + verb))
	Expect(err.Error()).To(ContainSubstring(framework.ControllerUser), "the refusal names who may")
}

// makeRecord is a CompletionRecord of a run of an AppWrapper named name
// (which need not exist), with the required fields only, kept an hour.
func makeRecord(namespace, name string) *wrapupv1alpha1.CompletionRecord {
	return &wrapupv1alpha1.CompletionRecord{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		AppWrapper: wrapupv1alpha1.RecordedAppWrapper{Name: name, UID: uuid.NewUUID()},
		Rule:       "admission-test",
		Outcome:    wrapupv1alpha1.OutcomeSucceeded,
		FinishedAt: metav1.NowMicro(),
		Action:     wrapupv1alpha1.RecordedAction{Action: wrapupv1alpha1.ActionUpdateStatus},
		Retention:  wrapupv1alpha1.RecordRetention{TTLSecondsAfterFinished: 3600, LimitPerNamespace: 100},
	}
}

package main

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// findServiceAccount finds wrapup's ServiceAccount from what the kustomize
// install and the chart create, or says that it was not found.
func TestFindServiceAccount(t *testing.T) {
	deployment := func(ns, name, sa string) *appsv1.Deployment {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app.kubernetes.io/name": "wrapup"}}}
		d.Spec.Template.Spec.ServiceAccountName = sa
		return d
	}
	binding := func(name, role string, labels map[string]string, ns, sa string) *rbacv1.ClusterRoleBinding {
		return &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}}}
	}
	serviceAccount := func(ns, name string) *corev1.ServiceAccount {
		return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	partOf := map[string]string{"app.kubernetes.io/part-of": "wrapup"}
	tests := []struct {
		name      string
		objs      []client.Object
		given     string
		want      string
		confirmed bool
		note      string
	}{
		{name: "a Helm release of another name: its Deployment", objs: []client.Object{deployment("platform", "batchgc-wrapup-controller", "batchgc-wrapup-controller")},
			want: "platform:batchgc-wrapup-controller", confirmed: true},
		{name: "no Deployment to read: the binding of the release's manager ClusterRole",
			objs: []client.Object{binding("batchgc-wrapup-manager-rolebinding", "batchgc-wrapup-manager-role", partOf, "platform", "batchgc-wrapup-controller"),
				binding("other-manager-rolebinding", "other-manager-role", nil, "else", "other")},
			want: "platform:batchgc-wrapup-controller", confirmed: true},
		{name: "the kustomize install's binding, unlabelled", objs: []client.Object{binding("b", "wrapup-manager-role", nil, "wrapup-system", "wrapup-controller")},
			want: "wrapup-system:wrapup-controller", confirmed: true},
		{name: "only the default install's ServiceAccount", objs: []client.Object{serviceAccount("wrapup-system", "wrapup-controller")},
			want: "wrapup-system:wrapup-controller", confirmed: true},
		{name: "nothing installed", note: "wrapup's ServiceAccount was not found (no Deployment labelled app.kubernetes.io/name=wrapup"},
		{name: "two installs", objs: []client.Object{deployment("a", "wrapup-controller", "wrapup-controller"), deployment("b", "wrapup-controller", "wrapup-controller")},
			note: "the Deployments labelled app.kubernetes.io/name=wrapup name several ServiceAccounts (a:wrapup-controller, b:wrapup-controller)"},
		{name: "one named that exists", objs: []client.Object{serviceAccount("platform", "gc")}, given: "platform:gc", want: "platform:gc", confirmed: true},
		{name: "one named that does not exist", objs: []client.Object{deployment("platform", "gc", "gc")}, given: "platform:wrong",
			note: "ServiceAccount platform/wrong (--wrapup-service-account) was not found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(tc.objs...).Build()
			sa := findServiceAccount(context.Background(), c, tc.given)
			if sa.name != tc.want || sa.confirmed != tc.confirmed || !strings.Contains(sa.note, tc.note) || tc.note == "" && sa.note != "" {
				t.Errorf("found %q (confirmed %v), note %q; want %q (confirmed %v), a note with %q", sa.name, sa.confirmed, sa.note, tc.want, tc.confirmed, tc.note)
			}
			if tc.note != "" && !strings.Contains(sa.note, "pass") {
				t.Errorf("note %q does not say what to pass", sa.note)
			}
		})
	}
}

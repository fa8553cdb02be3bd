package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wrapup-dev/wrapup/gc/triggers"
)

// managerSelector selects wrapup's manager Deployment, as the kustomize
// install (config/manager) and the Helm chart (its selector labels) label
// it, whatever the release's name and namespace.
var managerSelector = client.MatchingLabels{"app.kubernetes.io/name": "wrapup"}

// managerRoleSuffix ends the name of wrapup's manager ClusterRole:
// wrapup-manager-role in the kustomize install, <release>-wrapup-manager-role
// (or <release>-manager-role) in a Helm release.
const managerRoleSuffix = "-manager-role"

// serviceAccount is wrapup's ServiceAccount as a command found it.
type serviceAccount struct {
	// name is NAMESPACE:NAME; "" when it was not found.
	name string
	// confirmed: it was found installed (a Deployment runs as it, a
	// ClusterRoleBinding binds the manager ClusterRole to it, or it
	// exists). Unconfirmed, it is one that could not be looked up: an
	// access review's denial is then no evidence that wrapup is denied.
	confirmed bool
	// note says what the reader should know: that it was not found and
	// what to pass, or that it could not be checked.
	note string
}

// namespace is the namespace of the ServiceAccount, "" when not found.
func (sa serviceAccount) namespace() string {
	ns, _, _ := strings.Cut(sa.name, ":")
	return ns
}

// findServiceAccount finds wrapup's ServiceAccount: the one given
// (--wrapup-service-account, checked to exist), else the one wrapup's
// manager Deployment runs as, else the one a ClusterRoleBinding binds
// wrapup's manager ClusterRole to, else the default install's, if it
// exists. Whatever the reader may not read is skipped.
func findServiceAccount(ctx context.Context, c client.Reader, given string) serviceAccount {
	if given != "" {
		ns, name, _ := strings.Cut(given, ":")
		err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &corev1.ServiceAccount{})
		switch {
		case err == nil:
			return serviceAccount{name: given, confirmed: true}
		case apierrors.IsNotFound(err):
			return serviceAccount{note: fmt.Sprintf("ServiceAccount %s/%s (--wrapup-service-account) was not found: whether wrapup may list the trigger kinds is not checked; %s",
				ns, name, whatToPass)}
		}
		return serviceAccount{name: given}
	}

	var found []string
	var where string
	var deployments appsv1.DeploymentList
	if err := c.List(ctx, &deployments, managerSelector); err == nil {
		for _, d := range deployments.Items {
			sa := d.Spec.Template.Spec.ServiceAccountName
			if sa == "" {
				sa = "default"
			}
			if s := d.Namespace + ":" + sa; !slices.Contains(found, s) {
				found = append(found, s)
			}
		}
		where = "Deployments labelled app.kubernetes.io/name=wrapup"
	}
	if len(found) == 0 {
		var bindings rbacv1.ClusterRoleBindingList
		if err := c.List(ctx, &bindings); err == nil {
			for _, b := range bindings.Items {
				if !isManagerRole(b) {
					continue
				}
				for _, s := range b.Subjects {
					if s.Kind != rbacv1.ServiceAccountKind {
						continue
					}
					if s := s.Namespace + ":" + s.Name; !slices.Contains(found, s) {
						found = append(found, s)
					}
				}
			}
			where = "ClusterRoleBindings of wrapup's manager ClusterRole"
		}
	}
	switch {
	case len(found) == 1:
		return serviceAccount{name: found[0], confirmed: true}
	case len(found) > 1:
		return serviceAccount{note: fmt.Sprintf("the %s name several ServiceAccounts (%s): whether wrapup may list the trigger kinds is not checked; pass the one this cluster's wrapup runs as with --wrapup-service-account NAMESPACE:NAME",
			where, strings.Join(found, ", "))}
	}
	ns, name, _ := strings.Cut(defaultServiceAccount, ":")
	err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &corev1.ServiceAccount{})
	switch {
	case err == nil:
		return serviceAccount{name: defaultServiceAccount, confirmed: true}
	case apierrors.IsNotFound(err):
		return serviceAccount{note: "wrapup's ServiceAccount was not found (no Deployment labelled app.kubernetes.io/name=wrapup, no ClusterRoleBinding of a ClusterRole named *" +
			managerRoleSuffix + " of wrapup's, no ServiceAccount " + ns + "/" + name + "): whether wrapup may list the trigger kinds is not checked; " + whatToPass}
	}
	// Nothing could be looked up: the default install's, unconfirmed.
	return serviceAccount{name: defaultServiceAccount}
}

// whatToPass says how to name wrapup's ServiceAccount.
const whatToPass = "pass --wrapup-service-account NAMESPACE:NAME, the ServiceAccount wrapup's manager Deployment runs as " +
	"(kubectl get deployments -A -l app.kubernetes.io/name=wrapup -o jsonpath='{.items[*].spec.template.spec.serviceAccountName}')"

// isManagerRole says whether b binds wrapup's manager ClusterRole: one
// named *-manager-role that the kustomize install or a Helm release of
// wrapup made (the label app.kubernetes.io/part-of=wrapup on the binding,
// or the kustomize install's name).
func isManagerRole(b rbacv1.ClusterRoleBinding) bool {
	if b.RoleRef.Kind != "ClusterRole" || !strings.HasSuffix(b.RoleRef.Name, managerRoleSuffix) {
		return false
	}
	return b.Labels["app.kubernetes.io/part-of"] == "wrapup" || b.RoleRef.Name == "wrapup"+managerRoleSuffix
}

// errUnconfirmed is why an access review of a ServiceAccount that could
// not be looked up is not taken as a denial.
var errUnconfirmed = errors.New("it could not be looked up")

// access is the access review of wrapup's rights, asked as sa; nil when
// sa was not found (the reader's view then stands). A denial for a
// ServiceAccount that could not be confirmed is not taken as wrapup's: it
// may not be wrapup's at all.
func (sa serviceAccount) access(c client.Client) triggers.AccessReview {
	if sa.name == "" {
		return nil
	}
	review := serviceAccountAccess(c, sa.name)
	if sa.confirmed {
		return review
	}
	return func(ctx context.Context, gvr schema.GroupVersionResource) (bool, string, error) {
		allowed, why, err := review(ctx, gvr)
		if err == nil && !allowed {
			return false, "", fmt.Errorf("ServiceAccount %s may not, but %w to confirm that it is wrapup's (--wrapup-service-account names it)", sa.name, errUnconfirmed)
		}
		return allowed, why, err
	}
}

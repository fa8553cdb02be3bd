package framework

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The ServiceAccount wrapup runs as, from config/rbac.
const (
	ControllerNamespace      = "wrapup-system"
	ControllerServiceAccount = "wrapup-controller"
)

// InstallControllerRBAC applies config/rbac (the generated ClusterRole, the
// aggregated trigger-kinds role, the bindings, the ServiceAccount) so that
// suites run wrapup with exactly the permissions an install grants.
func InstallControllerRBAC(ctx context.Context, c client.Client) {
	ginkgo.GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ControllerNamespace}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
	}
	files, err := filepath.Glob(filepath.Join(RepoRoot(), "config", "rbac", "*.yaml"))
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	n := 0
	for _, f := range files {
		if filepath.Base(f) != "kustomization.yaml" {
			n += ApplyManifests(ctx, c, f)
		}
	}
	gomega.Expect(n).To(gomega.BeNumerically(">=", 6), "config/rbac has fewer objects than an install needs")
}

// ApplyManifests creates the objects of a YAML file (one or several
// documents) on c, leaving those that exist; it returns how many the file has.
func ApplyManifests(ctx context.Context, c client.Client, path string) int {
	ginkgo.GinkgoHelper()
	data, err := os.ReadFile(path)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	n := 0
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return n
			}
			gomega.Expect(err).NotTo(gomega.HaveOccurred(), path)
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := c.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
			gomega.Expect(err).NotTo(gomega.HaveOccurred(), "%s: %s", path, u.GetName())
		}
		n++
	}
}

// ServiceAccountConfig returns cfg acting as a ServiceAccount.
func ServiceAccountConfig(cfg *rest.Config, namespace, name string) *rest.Config {
	sa := rest.CopyConfig(cfg)
	sa.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + namespace + ":" + name}
	return sa
}

// ServiceAccountTokenConfig returns cfg acting as a ServiceAccount as a
// pod of it does: with a token the API server issued for it (TokenRequest),
// in place of cfg's client certificate, and no impersonation. The API
// server then authenticates each request from its token cache, rather
// than verifying a certificate chain and authorizing the impersonation
// (a cost that ServiceAccountConfig adds to every request).
func ServiceAccountTokenConfig(ctx context.Context, cfg *rest.Config, namespace, name string, valid time.Duration) *rest.Config {
	ginkgo.GinkgoHelper()
	cs, err := kubernetes.NewForConfig(cfg)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(valid.Seconds()))}}, metav1.CreateOptions{})
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), "a token for ServiceAccount %s/%s", namespace, name)
	sa := rest.AnonymousClientConfig(cfg)
	sa.BearerToken = tr.Status.Token
	return sa
}

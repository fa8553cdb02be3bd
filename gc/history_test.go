package gc

import (
	"context"
	"testing"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	corev1 "k8s.io/api/core/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// historyBed is a fake API server for the controllers' unit tests.
func historyBed(t *testing.T) client.WithWatch {
	t.Helper()
	scheme := apiruntime.NewScheme()
	for _, add := range []func(*apiruntime.Scheme) error{corev1.AddToScheme, awv1beta2.AddToScheme, wrapupv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	return fake.NewClientBuilder().WithScheme(scheme).Build()
}

func records(t *testing.T, c client.Client) int {
	t.Helper()
	var l wrapupv1alpha1.CompletionRecordList
	if err := c.List(context.Background(), &l); err != nil {
		t.Fatal(err)
	}
	return len(l.Items)
}

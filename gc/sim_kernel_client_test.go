package gc

// What wrapup writes through in a simulated world, as the simulation
// kernel gives it: the API calls' errors, and what a writer refuses. A
// world's writer is a thin adapter over the kernel's store
// (sim_kernel_store_test.go) that runs the world's oracle on each write.

import (
	"context"
	"fmt"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
)

var (
	simAppWrappers       = awv1beta2.GroupVersion.WithResource("appwrappers").GroupResource()
	simCompletionRecords = wrapupv1alpha1.GroupVersion.WithResource("completionrecords").GroupResource()
)

// newAWStore is the API server's AppWrappers.
func newAWStore(k *simKernel) *simStore[*awv1beta2.AppWrapper] {
	return newSimStore(k, simAppWrappers, "aw", func() *awv1beta2.AppWrapper { return &awv1beta2.AppWrapper{} })
}

// simUnavailable is the error of an API call that a fault refused.
func simUnavailable() error { return apierrors.NewServiceUnavailable("simulated outage") }

// simLostAnswer is the error of an API call applied whose answer a fault lost.
func simLostAnswer() error { return apierrors.NewTimeoutError("simulated lost answer", 1) }

// mergePatchData is the body of patch, a JSON merge patch (the only kind
// the kernel's store applies) of obj.
func mergePatchData(obj client.Object, patch client.Patch) ([]byte, error) {
	if patch.Type() != types.MergePatchType {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the simulated API server applies JSON merge patches, not %s", patch.Type()))
	}
	return patch.Data(obj)
}

// simNoWrites is the part of a world's client.Writer for what wrapup
// never does there.
type simNoWrites struct{}

func (simNoWrites) Create(_ context.Context, obj client.Object, _ ...client.CreateOption) error {
	return fmt.Errorf("wrapup creates no %T here", obj)
}
func (simNoWrites) Update(_ context.Context, obj client.Object, _ ...client.UpdateOption) error {
	return fmt.Errorf("wrapup updates no %T here", obj)
}
func (simNoWrites) DeleteAllOf(context.Context, client.Object, ...client.DeleteAllOfOption) error {
	return fmt.Errorf("wrapup deletes nothing in bulk")
}
func (simNoWrites) Apply(context.Context, runtime.ApplyConfiguration, ...client.ApplyOption) error {
	return fmt.Errorf("wrapup applies nothing")
}

package util

import (
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// Scheme returns a scheme with the kinds wrapup's tests read and write:
// the built-in kinds, AppWrappers, wrapup's own and Kueue's.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(awv1beta2.AddToScheme(s))
	utilruntime.Must(wrapupv1alpha1.AddToScheme(s))
	utilruntime.Must(kueue.AddToScheme(s))
	return s
}

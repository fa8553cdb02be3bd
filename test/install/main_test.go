package install

import (
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
)

// TestMain gives controller-runtime's logger (envtest's, here) a sink that
// drops its lines, as the tests read the manager's own log instead; unset,
// it prints a stack trace when first used after 30 s.
func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

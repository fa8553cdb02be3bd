package gc

import (
	"fmt"
	"math/rand"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// simKernel is what both simulated worlds (simWorld, mkWorld) run on: the
// seeded generator, the clock, the API server's counters and the trace,
// with the first violation of an invariant.
type simKernel struct {
	rng  *rand.Rand
	now  time.Time
	rv   int64
	seq  int
	uids int

	trace     []string
	violation string
}

func newSimKernel(seed int64) simKernel {
	return simKernel{rng: rand.New(rand.NewSource(seed)), now: simStart}
}

// logf adds a line to the trace, at the world's time.
func (k *simKernel) logf(format string, args ...any) {
	k.trace = append(k.trace, fmt.Sprintf("%8.1fs ", k.now.Sub(simStart).Seconds())+fmt.Sprintf(format, args...))
}

// fail records the first violation, which ends the history.
func (k *simKernel) fail(format string, args ...any) {
	if k.violation == "" {
		k.violation = fmt.Sprintf(format, args...)
		k.logf("VIOLATION: %s", k.violation)
	}
}

// newUID is a UID the API server would give, unique in the world.
func (k *simKernel) newUID(prefix string) types.UID {
	k.uids++
	return types.UID(fmt.Sprintf("%s-%d", prefix, k.uids))
}

// nextRV is the API server's next resourceVersion.
func (k *simKernel) nextRV() string {
	k.rv++
	return strconv.FormatInt(k.rv, 10)
}

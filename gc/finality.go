package gc

import (
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
)

// appWrapperRecheckPeriod is how often the AppWrapper controller looks at
// the components of a Running AppWrapper when no pod changes: a failed
// component can go unnoticed by it for that long.
const appWrapperRecheckPeriod = time.Minute

// failureIsFinal says whether a failed trigger is final, that is whether the
// AppWrapper controller will not retry it (retryLimit, Resetting): its phase
// is Failed, or it is Succeeded, or it stayed Running for the failure grace
// period after wrapup first saw the failure. While it is not, wait says how
// long until it may be (0: wait for the AppWrapper to change).
func failureIsFinal(aw *awv1beta2.AppWrapper, firstSeen, now time.Time, defaultGrace time.Duration) (final bool, wait time.Duration) {
	switch aw.Status.Phase {
	case awv1beta2.AppWrapperFailed, awv1beta2.AppWrapperSucceeded:
		return true, 0
	case awv1beta2.AppWrapperRunning:
		grace := defaultGrace
		if v, ok := aw.Annotations[awv1beta2.FailureGracePeriodDurationAnnotation]; ok {
			if d, err := time.ParseDuration(v); err == nil && d >= 0 {
				grace = d + appWrapperRecheckPeriod
			}
		}
		deadline := firstSeen.Add(grace)
		if !now.Before(deadline) {
			return true, 0
		}
		return false, deadline.Sub(now)
	default:
		// Resetting, Resuming, Suspending, Suspended, or not yet started: the
		// AppWrapper controller is acting, and its next phase change brings
		// the AppWrapper back here.
		return false, 0
	}
}

// timeLeft is how long until a finished AppWrapper's TTL expires.
func timeLeft(finishedAt time.Time, ttl time.Duration, now time.Time) time.Duration {
	left := finishedAt.Add(ttl).Sub(now)
	if left < 0 {
		return 0
	}
	return left
}

package decision

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	apimeta "k8s.io/apimachinery/pkg/api/meta"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// What a decision allows for of the AppWrapper controller's timing (v1.2,
// default configuration).
const (
	// AppWrapperRecheckPeriod is how often the AppWrapper controller looks
	// at the components of a Running AppWrapper when no pod changes: a
	// failed component can go unnoticed by it for that long.
	AppWrapperRecheckPeriod = time.Minute
	// Slack is added to the AppWrapper controller's periods for its latency
	// (its queue, a loaded API server), so that a failure is never final at
	// the very instant it may still be about to retry it.
	Slack = 30 * time.Second
	// AppWrapperFailureGracePeriod is the AppWrapper controller's default
	// failureGracePeriod: how long it lets failed pods recover before it
	// resets (retries) or fails the AppWrapper.
	AppWrapperFailureGracePeriod = time.Minute
	// DefaultFailureGracePeriod is Input.FailureGracePeriod's default: the
	// AppWrapper controller's failure grace and recheck period, and slack.
	DefaultFailureGracePeriod = AppWrapperFailureGracePeriod + AppWrapperRecheckPeriod + Slack
	// UnhealthyBackstop is how much longer than the grace a decision waits
	// for the AppWrapper controller to act on a Running AppWrapper it
	// reports Unhealthy (mayRetry), before the failure is final anyway.
	UnhealthyBackstop = 15 * time.Minute
	// DefaultRetryLimit is the AppWrapper controller's default retryLimit.
	DefaultRetryLimit = 3
	// gracePeriodMaximum is the AppWrapper controller's default cap on the
	// grace periods its annotations set.
	gracePeriodMaximum = 24 * time.Hour
)

// ReadsAppWrapperAnnotation says whether a decision reads the AppWrapper
// annotation key (never the mirror of the run's record). wrapup's cache
// keeps no other annotation of an AppWrapper: add any new read here.
func ReadsAppWrapperAnnotation(key string) bool {
	return slices.Contains([]string{awv1beta2.RetryLimitAnnotation, awv1beta2.FailureGracePeriodDurationAnnotation,
		awv1beta2.DeletionOnFailureGracePeriodAnnotation, wrapupv1alpha1.IgnoreAnnotation, wrapupv1alpha1.TriggerAnnotation}, key)
}

// annotationDuration reads a duration annotation of aw as the AppWrapper
// controller does (capped at its maximum); ok is false when it is absent
// or does not parse.
func annotationDuration(aw *awv1beta2.AppWrapper, key string) (time.Duration, bool) {
	d, err := time.ParseDuration(aw.Annotations[key]) // "" (absent) does not parse
	if err != nil {
		return 0, false
	}
	return min(max(d, 0), gracePeriodMaximum), true
}

// retryLimit is the AppWrapper's retryLimit, as its controller reads it.
func retryLimit(aw *awv1beta2.AppWrapper) int32 {
	if v, ok := aw.Annotations[awv1beta2.RetryLimitAnnotation]; ok {
		if n, err := strconv.Atoi(v); err == nil {
			return int32(n)
		}
	}
	return DefaultRetryLimit
}

// mayRetry says whether the AppWrapper controller reports aw Unhealthy and
// has retries left: it is then about to reset it (or to fail it, if the
// failure is terminal).
func mayRetry(aw *awv1beta2.AppWrapper) bool {
	return apimeta.IsStatusConditionTrue(aw.Status.Conditions, string(awv1beta2.Unhealthy)) &&
		aw.Status.Retries < retryLimit(aw)
}

// failureFinality says whether a failed trigger of aw is final: the
// AppWrapper controller will not retry it (Failed or Succeeded, or Running
// past the grace since the failure was first seen). While it is not, wait
// says how long until it may be (0: until the AppWrapper changes).
func failureFinality(aw *awv1beta2.AppWrapper, firstSeen, now time.Time, defaultGrace time.Duration) (final bool, wait time.Duration, why string) {
	switch aw.Status.Phase {
	case awv1beta2.AppWrapperFailed, awv1beta2.AppWrapperSucceeded:
		return true, 0, ""
	case awv1beta2.AppWrapperRunning:
		if aw.Spec.Suspend {
			return false, 0, "Kueue suspends the AppWrapper: its controller takes the components down; a re-created trigger is evaluated afresh"
		}
		grace := defaultGrace
		if d, ok := annotationDuration(aw, awv1beta2.FailureGracePeriodDurationAnnotation); ok {
			grace = d + AppWrapperRecheckPeriod + Slack
		}
		deadline := firstSeen.Add(grace)
		why = fmt.Sprintf("the AppWrapper is Running: the AppWrapper controller may still retry; the failure is final once it stays Running for %s after wrapup first saw the failure", grace)
		if mayRetry(aw) {
			deadline = deadline.Add(UnhealthyBackstop)
			why = fmt.Sprintf("the AppWrapper controller reports the AppWrapper Unhealthy with %d of %d retries used: wrapup waits for it to reset or fail it (at most %s more)",
				aw.Status.Retries, retryLimit(aw), deadline.Sub(now).Round(time.Second))
		}
		if !now.Before(deadline) {
			return true, 0, ""
		}
		return false, deadline.Sub(now), why
	default:
		// The AppWrapper controller is acting: its next phase change
		// brings the AppWrapper back.
		return false, 0, fmt.Sprintf("the AppWrapper is %s: the AppWrapper controller is acting (retrying or suspending); a re-created trigger is evaluated afresh",
			phaseOrNone(aw.Status.Phase))
	}
}

// failedHoldStart is when the AppWrapper controller started holding a
// failed AppWrapper (DeletingResources, reason DeletionPaused); ok is false
// before it wrote it. It sets that condition on every pass, its time
// changed only with its status (meta.SetStatusCondition): when the hold
// ends, its teardown sets it True/DeletionInitiated, and the next pass
// False/DeletionPaused again, with a new time, from which it waits the
// hold once more (appwrapper v1.2.2 appwrapper_controller.go, Reconcile,
// case AppWrapperFailed; resource_management.go, deleteComponents). A
// decision counts the hold from the first time seen (Input.HoldStart).
func failedHoldStart(aw *awv1beta2.AppWrapper) (time.Time, bool) {
	c := apimeta.FindStatusCondition(aw.Status.Conditions, string(awv1beta2.DeletingResources))
	if c == nil || c.Reason != "DeletionPaused" {
		return time.Time{}, false
	}
	return c.LastTransitionTime.Time, true
}

func phaseOrNone(p awv1beta2.AppWrapperPhase) string {
	if p == "" {
		return "not started"
	}
	return string(p)
}

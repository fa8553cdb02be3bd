package decision

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
)

// A rule whose policy is All or Any decides over several candidates, each
// read as a single trigger is; the policy combines their states, and the
// record keeps which decided (Record.Triggers), so that what holds for a
// single trigger holds for each of them (decideRecorded).

// settled is what a policy makes of its candidates' states.
type settled struct {
	// outcome is "" while the candidates have not decided; Failed is final
	// only once the AppWrapper controller will not retry (failureFinality).
	outcome  wrapupv1alpha1.Outcome
	deciders []int // the candidates whose states decide it
}

// combine combines the candidates' states under policy: All succeeds once
// every candidate succeeded and fails as soon as one failed; Any succeeds
// as soon as one succeeded and fails once every one failed.
func combine(policy wrapupv1alpha1.TriggerPolicy, cs []observed) settled {
	var succeeded, failed []int
	for i, c := range cs {
		switch c.state {
		case liveSucceeded:
			succeeded = append(succeeded, i)
		case liveFailed:
			failed = append(failed, i)
		}
	}
	switch policy {
	case wrapupv1alpha1.TriggerPolicyAny:
		if len(succeeded) > 0 {
			return settled{outcome: wrapupv1alpha1.OutcomeSucceeded, deciders: succeeded[:1]}
		}
		if len(failed) == len(cs) {
			return settled{outcome: wrapupv1alpha1.OutcomeFailed, deciders: failed}
		}
	default: // All
		if len(failed) > 0 {
			return settled{outcome: wrapupv1alpha1.OutcomeFailed, deciders: failed[:1]}
		}
		if len(succeeded) == len(cs) {
			return settled{outcome: wrapupv1alpha1.OutcomeSucceeded, deciders: succeeded}
		}
	}
	return settled{}
}

// failureKey is what the controller remembers a failure of the candidates
// by: the UIDs of those that failed, sorted.
func failureKey(cs []observed, deciders []int) types.UID {
	uids := make([]string, len(deciders))
	for k, i := range deciders {
		uids[k] = string(cs[i].info.UID)
	}
	sort.Strings(uids)
	return types.UID(strings.Join(uids, ","))
}

func (c *observed) name() string {
	if c.info.Name != "" {
		return c.info.Kind.Kind + " " + c.info.Name
	}
	return c.info.Kind.Kind + " " + c.info.Template
}

// settle combines the triggers' states cs under policy, and keeps what
// the controller remembers of a failure, by the triggers that failed.
func (d *Decision) settle(in Input, policy wrapupv1alpha1.TriggerPolicy, cs []observed) settled {
	v := combine(policy, cs)
	failed := v.outcome == wrapupv1alpha1.OutcomeFailed
	if failed && policy == wrapupv1alpha1.TriggerPolicyAll {
		// The failed candidate whose failure the controller remembers
		// decides: its grace runs from when it was first seen.
		for i := range cs {
			if cs[i].state == liveFailed && cs[i].info.UID != "" && cs[i].info.UID == in.FailureSeen.TriggerUID {
				v.deciders = []int{i}
			}
		}
	}
	switch {
	case failed:
		key := failureKey(cs, v.deciders)
		first := in.Now
		if in.FailureSeen.TriggerUID == key && !in.FailureSeen.At.IsZero() && in.FailureSeen.At.Before(first) {
			first = in.FailureSeen.At
		}
		d.FailureSeen = &FailureSeen{TriggerUID: key, At: first}
	case !slices.ContainsFunc(cs, func(c observed) bool { return c.state == liveUnknown || c.state == liveError }):
		d.FailureSeen = nil
	}
	return v
}

// decideUnsettled decides for a run with no record whose triggers cs have
// not settled.
func (d *Decision) decideUnsettled(in Input, rule *wrapupv1alpha1.CompletionRule, cs []observed) {
	aw, one := in.AppWrapper, d.Trigger != nil
	var unknown, errs, notOwned, unfinished int
	var running, all []int
	for i, c := range cs {
		switch {
		case c.notOwned:
			notOwned++
		case c.state == liveError:
			errs++
		case c.state == liveUnknown:
			unknown++
		}
		if c.state != liveSucceeded && c.state != liveFailed && c.state != liveAbsent {
			unfinished++
		}
		if c.state != liveSucceeded {
			running = append(running, i)
		}
		all = append(all, i)
	}
	fromPhase := func(outcome wrapupv1alpha1.Outcome) {
		message := "the AppWrapper controller marked the AppWrapper " + string(outcome)
		if c := apimeta.FindStatusCondition(aw.Status.Conditions, string(awv1beta2.Unhealthy)); c != nil && c.Message != "" && outcome == wrapupv1alpha1.OutcomeFailed {
			message += ": " + c.Message
		}
		if one {
			d.Evaluation = &Evaluation{Outcome: celpolicies.Outcome(outcome), FromAppWrapperPhase: true, Message: message}
		}
		d.record(in, rule, outcome, cs, all, message)
	}
	switch phase := aw.Status.Phase; {
	case unknown > 0 && one:
		d.Verdict, d.Requeue = VerdictWaitingForTrigger, PendingRetry
		d.Reason = d.Trigger.Problem + "; wrapup looks again when it has"
	case unknown > 0:
		d.Verdict, d.Requeue = VerdictWaitingForTrigger, PendingRetry
		d.Reason = fmt.Sprintf("%d of %d triggers were not read (their cache has not listed yet); wrapup looks again when it has", unknown, len(cs))
	case phase == awv1beta2.AppWrapperFailed && errs == 0:
		// The AppWrapper controller gave up (retry limit, a deleted
		// component, a fatal error) and tears the components down.
		fromPhase(wrapupv1alpha1.OutcomeFailed)
	case phase == awv1beta2.AppWrapperSucceeded && unfinished == 0 && (notOwned == 0 || one):
		// Every pod succeeded, as the AppWrapper controller saw it, and the
		// triggers that are not there any more (their own TTL) succeeded.
		fromPhase(wrapupv1alpha1.OutcomeSucceeded)
	case one && errs > 0:
		d.Verdict = VerdictWaitingForTrigger
		d.Reason = "the evaluation failed, which counts as not finished (Warning Event EvaluationError); wrapup evaluates again when the trigger changes"
	case one && notOwned > 0:
		d.Verdict, d.Reason = VerdictNoTrigger, d.Trigger.Problem
	case one && cs[0].state != liveRunning:
		d.Verdict = VerdictWaitingForTrigger
		d.Reason = d.Trigger.Problem + "; wrapup looks again when it changes"
	case one:
		d.Verdict = VerdictWaitingForTrigger
		d.Reason = "the trigger is not finished; wrapup evaluates again when it changes"
	default:
		d.Verdict = VerdictWaitingForTrigger
		d.Reason = fmt.Sprintf("policy %s: %d of %d triggers have not finished (%s); wrapup evaluates again when one changes",
			d.Policy, len(running), len(cs), joinNames(cs, running))
		if errs > 0 {
			d.Reason += fmt.Sprintf("; %d evaluation(s) failed, which counts as not finished (Warning Event EvaluationError)", errs)
		}
	}
}

func joinNames(cs []observed, idx []int) string {
	names := make([]string, len(idx))
	for k, i := range idx {
		names[k] = cs[i].name()
	}
	return Truncate(strings.Join(names, ", "), MaxMessage/2)
}

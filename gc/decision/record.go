package decision

import (
	"slices"
	"strconv"
	"strings"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	"k8s.io/apimachinery/pkg/types"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// Record is the outcome wrapup wrote on an AppWrapper's metadata: the
// label wrapup.dev/outcome and the annotations beside it. It is durable,
// and for the trigger it names, final: only that trigger seen running
// again, or (after a failure) a new attempt of the AppWrapper controller,
// clears it.
type Record struct {
	// AppWrapperUID is the UID of the AppWrapper it was recorded on; empty
	// on records written before it was kept.
	AppWrapperUID types.UID
	Outcome       wrapupv1alpha1.Outcome
	Rule          string
	FinishedAt    time.Time
	Message       string
	// TriggerUID is the UID of the trigger the outcome was recorded for;
	// empty when the AppWrapper's phase decided it with no live trigger.
	TriggerUID types.UID
	// TriggerRef is the trigger component, as Ref.String says; empty on
	// records written before it was kept. With several candidates, the
	// first of Triggers.
	TriggerRef string
	// Triggers are, under a rule whose policy is All or Any and with
	// several candidates, the candidates whose states decided the outcome:
	// every one for All's success and Any's failure, the one that decided
	// for All's failure and Any's success. Empty for a single trigger.
	Triggers []RecordedTrigger
	// Policy is the rule's trigger policy that decided, with Triggers: a
	// rule whose policy changed since decides afresh, as a rule that takes
	// another component does.
	Policy wrapupv1alpha1.TriggerPolicy
}

// RecordedTrigger is a candidate whose state decided an outcome: its
// component index and the UID of its live object ("" when the
// AppWrapper's phase decided without one).
type RecordedTrigger struct {
	Index int
	UID   types.UID
}

// formatTriggers is the value of the triggers annotation:
// "All:1=<uid>,3=<uid>"; "" for none.
func formatTriggers(p wrapupv1alpha1.TriggerPolicy, ts []RecordedTrigger) string {
	if len(ts) == 0 {
		return ""
	}
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = strconv.Itoa(t.Index) + "=" + string(t.UID)
	}
	return string(p) + ":" + strings.Join(parts, ",")
}

// parseTriggers reads the triggers annotation; ok is false when it does
// not parse (the record is then as good as none).
func parseTriggers(v string) (wrapupv1alpha1.TriggerPolicy, []RecordedTrigger, bool) {
	if v == "" {
		return "", nil, true
	}
	p, v, ok := strings.Cut(v, ":")
	if !ok || (p != string(wrapupv1alpha1.TriggerPolicyAll) && p != string(wrapupv1alpha1.TriggerPolicyAny)) {
		return "", nil, false
	}
	parts := strings.Split(v, ",")
	if len(parts) > wrapupv1alpha1.MaxTriggers {
		return "", nil, false
	}
	out := make([]RecordedTrigger, len(parts))
	for i, p := range parts {
		idx, uid, ok := strings.Cut(p, "=")
		n, err := strconv.Atoi(idx)
		if !ok || err != nil || n < 0 {
			return "", nil, false
		}
		out[i] = RecordedTrigger{Index: n, UID: types.UID(uid)}
	}
	return wrapupv1alpha1.TriggerPolicy(p), out, true
}

// For says whether rec was recorded for the trigger component ref of aw,
// whose live trigger, when read, has the UID live ("" when none). A record
// that is not is someone else's, and says nothing of this trigger:
//   - one that names another component (written under a rule that took
//     another one as the trigger);
//   - one of another AppWrapper (copied onto an AppWrapper created again
//     from a saved manifest, or restored from a backup): it names another
//     AppWrapper's UID, or, written before records named it, it is older
//     than the AppWrapper (the only record whose time is compared with
//     the API server's: a record's time is this controller's clock);
//   - one that names no trigger while a trigger lives and the AppWrapper's
//     phase did not decide (wrapup writes no such record);
//   - one written before records named their component, for another
//     trigger than the live one (it may have been another component's).
func (rec *Record) For(ref Ref, aw *awv1beta2.AppWrapper, live types.UID) bool {
	switch {
	case rec.TriggerRef != "" && rec.TriggerRef != ref.String():
		return false
	case !rec.onAppWrapper(aw):
		return false
	case rec.TriggerUID == "" && live != "" &&
		aw.Status.Phase != awv1beta2.AppWrapperFailed && aw.Status.Phase != awv1beta2.AppWrapperSucceeded:
		return false
	case rec.TriggerRef == "" && live != "" && live != rec.TriggerUID:
		return false
	case len(rec.Triggers) > 0:
		// Several candidates decided it: not the record of a single one.
		return false
	}
	return true
}

// onAppWrapper says whether rec was recorded on aw, not copied onto it
// with the rest of another AppWrapper's metadata.
func (rec *Record) onAppWrapper(aw *awv1beta2.AppWrapper) bool {
	if rec.AppWrapperUID != "" {
		return rec.AppWrapperUID == aw.UID
	}
	return !rec.FinishedAt.Before(aw.CreationTimestamp.Time)
}

// forMany says whether rec was recorded for the candidates refs of aw,
// whose live objects have the UIDs live (by component index; "" or absent
// when not read): as For says for one trigger, for each candidate that
// decided.
func (rec *Record) forMany(policy wrapupv1alpha1.TriggerPolicy, refs []Ref, aw *awv1beta2.AppWrapper, live map[int]types.UID) bool {
	if len(rec.Triggers) == 0 || rec.Policy != policy || !rec.onAppWrapper(aw) {
		return false
	}
	byIndex := make(map[int]Ref, len(refs))
	for _, r := range refs {
		byIndex[r.Index] = r
	}
	first, ok := byIndex[rec.Triggers[0].Index]
	if !ok || rec.TriggerRef != first.String() {
		return false
	}
	anyUID, anyLive := false, false
	seen := map[int]bool{}
	for _, t := range rec.Triggers {
		if _, ok := byIndex[t.Index]; !ok || seen[t.Index] {
			return false
		}
		seen[t.Index] = true
		anyUID = anyUID || t.UID != ""
	}
	if len(rec.Triggers) > 1 && len(rec.Triggers) != len(refs) {
		// Every candidate decided it (All's success, Any's failure, the
		// AppWrapper's phase), and the rule has other candidates now (it
		// was edited, or another rule took over): not theirs.
		return false
	}
	for _, uid := range live {
		anyLive = anyLive || uid != ""
	}
	if !anyUID && anyLive && aw.Status.Phase != awv1beta2.AppWrapperFailed && aw.Status.Phase != awv1beta2.AppWrapperSucceeded {
		return false
	}
	return true
}

// finishedAtLayout keeps the time exactly, to the nanosecond, always with
// its fraction (a time without one was written by an older wrapup, to the
// second): a TTL counted from a time rounded down would end early.
const finishedAtLayout = "2006-01-02T15:04:05.000000000Z07:00"

// MaxMessage bounds the message annotation (and the messages of Events).
const MaxMessage = 1024

// ReadRecord returns the record on aw, or nil when there is none (or it
// does not parse, in which case it is as good as none: wrapup writes it
// whole in one patch).
func ReadRecord(aw *awv1beta2.AppWrapper) *Record {
	o := wrapupv1alpha1.Outcome(aw.Labels[wrapupv1alpha1.OutcomeLabel])
	if o != wrapupv1alpha1.OutcomeSucceeded && o != wrapupv1alpha1.OutcomeFailed {
		return nil
	}
	v := aw.Annotations[wrapupv1alpha1.FinishedAtAnnotation]
	at, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return nil
	}
	if !strings.Contains(v, ".") {
		// Written to the second: the trigger finished within the second
		// after it. Taking the end of that second never shortens a TTL.
		at = at.Add(time.Second - time.Millisecond)
	}
	policy, triggers, ok := parseTriggers(aw.Annotations[wrapupv1alpha1.TriggersAnnotation])
	if !ok {
		return nil
	}
	return &Record{
		AppWrapperUID: types.UID(aw.Annotations[wrapupv1alpha1.AppWrapperUIDAnnotation]),
		Triggers:      triggers,
		Policy:        policy,
		Outcome:       o,
		Rule:          aw.Annotations[wrapupv1alpha1.RuleAnnotation],
		FinishedAt:    at,
		Message:       aw.Annotations[wrapupv1alpha1.MessageAnnotation],
		TriggerUID:    types.UID(aw.Annotations[wrapupv1alpha1.TriggerUIDAnnotation]),
		TriggerRef:    aw.Annotations[wrapupv1alpha1.TriggerRefAnnotation],
	}
}

// Apply writes rec onto aw's labels and annotations; a nil rec removes the
// record.
func (rec *Record) Apply(aw *awv1beta2.AppWrapper) {
	if rec == nil {
		delete(aw.Labels, wrapupv1alpha1.OutcomeLabel)
		for _, k := range recordAnnotations {
			delete(aw.Annotations, k)
		}
		return
	}
	if aw.Labels == nil {
		aw.Labels = map[string]string{}
	}
	if aw.Annotations == nil {
		aw.Annotations = map[string]string{}
	}
	aw.Labels[wrapupv1alpha1.OutcomeLabel] = string(rec.Outcome)
	aw.Annotations[wrapupv1alpha1.RuleAnnotation] = rec.Rule
	aw.Annotations[wrapupv1alpha1.FinishedAtAnnotation] = rec.FinishedAt.UTC().Format(finishedAtLayout)
	aw.Annotations[wrapupv1alpha1.MessageAnnotation] = Truncate(rec.Message, MaxMessage)
	for k, v := range map[string]string{wrapupv1alpha1.AppWrapperUIDAnnotation: string(rec.AppWrapperUID),
		wrapupv1alpha1.TriggerUIDAnnotation: string(rec.TriggerUID), wrapupv1alpha1.TriggerRefAnnotation: rec.TriggerRef,
		wrapupv1alpha1.TriggersAnnotation: formatTriggers(rec.Policy, rec.Triggers)} {
		if v != "" {
			aw.Annotations[k] = v
		} else {
			delete(aw.Annotations, k)
		}
	}
}

// RecordAnnotations are the annotations a record is written in (its
// label is wrapupv1alpha1.OutcomeLabel): a write or a clear of the record
// changes these and nothing else.
func RecordAnnotations() []string { return slices.Clone(recordAnnotations) }

var recordAnnotations = []string{
	wrapupv1alpha1.RuleAnnotation, wrapupv1alpha1.FinishedAtAnnotation,
	wrapupv1alpha1.MessageAnnotation, wrapupv1alpha1.TriggerUIDAnnotation, wrapupv1alpha1.TriggerRefAnnotation,
	wrapupv1alpha1.TriggersAnnotation, wrapupv1alpha1.AppWrapperUIDAnnotation,
}

// Same says whether rec and o record the same outcome of the same trigger.
func (rec *Record) Same(o *Record) bool {
	if rec == nil || o == nil {
		return rec == o
	}
	return rec.AppWrapperUID == o.AppWrapperUID && rec.Outcome == o.Outcome && rec.TriggerUID == o.TriggerUID && rec.TriggerRef == o.TriggerRef && rec.Rule == o.Rule &&
		rec.FinishedAt.Equal(o.FinishedAt) && formatTriggers(rec.Policy, rec.Triggers) == formatTriggers(o.Policy, o.Triggers)
}

// HistorySkew is how far a record's finished-at may lie outside the span
// from the AppWrapper's creation to now and still be taken as this
// controller's (its clock and the API server's may differ a little).
const HistorySkew = time.Minute

// BorneOut says whether what d observed on in bears out the record d read
// on the AppWrapper (d.Recorded), so that a CompletionRecord may be written
// of it although this process did not decide it (after a restart, or by
// another replica). A record is metadata anyone who may patch the
// AppWrapper can write: it is borne out when it is of this AppWrapper,
// finished between the AppWrapper's creation and now, and the world shows
// its outcome. A trigger that is read speaks first: it must be the one the
// record names (same UID), read with the recorded outcome, or, for a
// failure, the AppWrapper's phase Failed with the trigger not read as a
// success. Only when no trigger the record names can be read does the
// AppWrapper's phase (the AppWrapper controller's, through the status
// subresource) bear it out alone.
func BorneOut(in Input, d Decision) bool {
	aw, rec := in.AppWrapper, d.Recorded
	if aw == nil || rec == nil || rec.AppWrapperUID != "" && rec.AppWrapperUID != aw.UID {
		return false
	}
	if !FinishedInLife(in, rec) {
		return false
	}
	phase := aw.Status.Phase == awv1beta2.AppWrapperFailed && rec.Outcome == wrapupv1alpha1.OutcomeFailed ||
		aw.Status.Phase == awv1beta2.AppWrapperSucceeded && rec.Outcome == wrapupv1alpha1.OutcomeSucceeded
	// states are the read outcomes of the triggers the record names, by
	// their recorded UID; a trigger read under another UID contradicts it.
	read, contradicted, shown := false, false, false
	check := func(uid, recorded types.UID, state string) {
		if uid == "" || recorded == "" {
			// Not read, or named by no UID (the AppWrapper's phase
			// decided it with no live trigger).
			return
		}
		read = true
		switch {
		case uid != recorded:
			contradicted = true
		case state == string(rec.Outcome):
			shown = true
		case state == string(wrapupv1alpha1.OutcomeSucceeded) || state == string(wrapupv1alpha1.OutcomeFailed):
			contradicted = true
		}
	}
	if t := d.Trigger; t != nil && len(rec.Triggers) == 0 {
		state := ""
		if e := d.Evaluation; e != nil && e.Error == "" && !e.FromAppWrapperPhase && t.Problem == "" {
			state = string(e.Outcome)
		}
		if t.Problem != "" && t.UID != "" {
			state = "TornDown"
		}
		check(t.UID, rec.TriggerUID, state)
	}
	for _, c := range d.Candidates {
		for _, rt := range rec.Triggers {
			if rt.Index == c.Index {
				check(c.UID, rt.UID, c.State)
			}
		}
	}
	switch {
	case contradicted:
		return false
	case shown:
		return true
	case read:
		// Named and read, not finished so: only a failure the AppWrapper
		// controller gave up on is borne out by its phase.
		return phase && rec.Outcome == wrapupv1alpha1.OutcomeFailed
	}
	return phase
}

// FinishedInLife says whether rec finished while in's AppWrapper existed:
// not before its creation, nor after now (HistorySkew aside).
func FinishedInLife(in Input, rec *Record) bool {
	return !rec.FinishedAt.After(in.Now.Add(HistorySkew)) && !rec.FinishedAt.Before(in.AppWrapper.CreationTimestamp.Add(-HistorySkew))
}

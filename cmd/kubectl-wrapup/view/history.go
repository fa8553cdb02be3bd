package view

import (
	"cmp"
	"context"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/gc/decision"
)

// Records lists the CompletionRecords in namespace ("" for every
// namespace) that selector selects (nil for all) and, when appWrapper is
// set, that are of the AppWrapper of that name; the newest first.
func Records(ctx context.Context, r client.Reader, namespace, appWrapper string, selector labels.Selector) ([]wrapupv1alpha1.CompletionRecord, error) {
	var list wrapupv1alpha1.CompletionRecordList
	opts := []client.ListOption{client.InNamespace(namespace)}
	if selector != nil {
		opts = append(opts, client.MatchingLabelsSelector{Selector: selector})
	}
	if err := r.List(ctx, &list, opts...); err != nil {
		return nil, fmt.Errorf("listing CompletionRecords: %w", err)
	}
	out := list.Items[:0]
	for _, cr := range list.Items {
		if appWrapper == "" || cr.AppWrapper.Name == appWrapper {
			out = append(out, cr)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[j].FinishedAt.Before(&out[i].FinishedAt) })
	return out, nil
}

// DescribeRecord renders a CompletionRecord for people, as explain does
// for a live AppWrapper.
func DescribeRecord(cr *wrapupv1alpha1.CompletionRecord) string {
	var b strings.Builder
	fmt.Fprintf(&b, "AppWrapper: %s/%s (uid %s): gone; its CompletionRecord %s\n", cr.Namespace, cr.AppWrapper.Name, cr.AppWrapper.UID, cr.Name)
	fmt.Fprintf(&b, "Outcome:    %s by rule %s at %s\n", cr.Outcome, cr.Rule, cr.FinishedAt.UTC().Format(time.RFC3339))
	if c := cr.Cleared; c != nil {
		fmt.Fprintf(&b, "Cleared:    the outcome was cleared at %s: it no longer held%s; no later outcome was recorded\n",
			c.At.UTC().Format(time.RFC3339), pick(c.Message != "", ": "+c.Message, ""))
	}
	field(&b, "Message:", cr.Message)
	fmt.Fprintf(&b, "Action:     %s\n", describeRecordedAction(cr.Action))
	field(&b, "Queue:", cr.AppWrapper.QueueName)
	var labels []string
	for k, v := range cr.AppWrapper.Labels {
		labels = append(labels, k+"="+v)
	}
	sort.Strings(labels)
	field(&b, "Labels:", strings.Join(labels, ", "))
	if len(cr.Triggers) > 0 {
		b.WriteString("Triggers:   (* decided the outcome)\n")
	}
	table(&b, cr.Triggers, func(t wrapupv1alpha1.RecordedTrigger) string {
		var conds []string
		for _, c := range t.Conditions {
			if c.Status == "True" {
				conds = append(conds, c.Type)
			}
		}
		state := t.State + pick(t.Phase != "", " (phase "+t.Phase+")", "")
		return fmt.Sprintf("  %s %s %s %s\tuid %s\t%s\t%s", pick(t.Decided, "*", " "), t.APIVersion, t.Kind, t.Name, t.UID, state, strings.Join(conds, ","))
	})
	if ttl := time.Duration(cr.Retention.TTLSecondsAfterFinished) * time.Second; ttl > 0 {
		fmt.Fprintf(&b, "Kept:       %s after the AppWrapper is gone (not before %s), and among the newest %d of rule %s in the namespace\n",
			ttl, cr.FinishedAt.Add(ttl).UTC().Format(time.RFC3339), cr.Retention.LimitPerNamespace, cr.Rule)
	} else {
		b.WriteString("Kept:       while the AppWrapper exists (its rule keeps no history)\n")
	}
	return b.String()
}

func describeRecordedAction(a wrapupv1alpha1.RecordedAction) string {
	switch {
	case a.Action == wrapupv1alpha1.ActionUpdateStatus:
		return "UpdateStatus: the outcome was recorded, nothing deleted"
	case a.DryRun:
		return "DeleteAll in dry-run mode: nothing deleted"
	case a.DeleteAfter != nil:
		return "DeleteAll: the AppWrapper and its components deleted from " + a.DeleteAfter.UTC().Format(time.RFC3339)
	}
	return string(a.Action)
}

// HistoryTable renders records as a table, with their namespaces when
// withNamespace is set; wide adds the record's name, the AppWrapper's UID,
// its queue and the whole message.
func HistoryTable(records []wrapupv1alpha1.CompletionRecord, withNamespace, wide bool, now time.Time) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 3, ' ', 0)
	row := func(namespace string, cols []string, wideCols ...string) {
		if withNamespace {
			cols = append([]string{namespace}, cols...)
		}
		if wide {
			cols = append(cols, wideCols...)
		}
		fmt.Fprintln(tw, strings.Join(cols, "\t"))
	}
	row("NAMESPACE", []string{"APPWRAPPER", "OUTCOME", "RULE", "ACTION", "FINISHED", "MESSAGE"}, "RECORD", "UID", "QUEUE")
	for _, cr := range records {
		msg := strings.ReplaceAll(cr.Message, "\n", " ")
		row(cr.Namespace, []string{cr.AppWrapper.Name, pick(cr.Cleared != nil, "Cleared (was "+string(cr.Outcome)+")", string(cr.Outcome)), cr.Rule,
			string(cr.Action.Action) + pick(cr.Action.DryRun, " (dry run)", ""), fmt.Sprintf("%s ago", now.Sub(cr.FinishedAt.Time).Round(time.Second)),
			pick(wide, msg, decision.Truncate(msg, 60))}, cr.Name, string(cr.AppWrapper.UID), cmp.Or(cr.AppWrapper.QueueName, "<none>"))
	}
	_ = tw.Flush()
	return b.String()
}

package view

import (
	"strings"
	"testing"
	"time"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/test/util"
)

// A record whose outcome was cleared (the AppWrapper controller retried
// after the failure) keeps that outcome as history: explain of the gone
// AppWrapper and history must say it no longer held, not show it as how
// the run ended.
func TestClearedRecordIsShownCleared(t *testing.T) {
	aw := exAppWrapper().Obj()
	rule := served(jobRule("jobs"))
	cleared := exNow.Add(-time.Minute)
	cr := util.MakeRecord(aw, rule, wrapupv1alpha1.OutcomeFailed, exNow.Add(-time.Hour)).Trigger(1, exJobUID).Message("BackoffLimitExceeded").
		Cleared(cleared).Obj()
	cr.Cleared.Message = "the AppWrapper controller made a new attempt"

	desc := DescribeRecord(cr)
	if !strings.Contains(desc, "cleared") || !strings.Contains(desc, cleared.UTC().Format(time.RFC3339)) {
		t.Errorf("DescribeRecord of a cleared record does not say it was cleared, nor when:\n%s", desc)
	}
	table := HistoryTable([]wrapupv1alpha1.CompletionRecord{*cr}, false, false, exNow)
	if !strings.Contains(table, "cleared") && !strings.Contains(table, "Cleared") {
		t.Errorf("history lists a cleared outcome as the run's:\n%s", table)
	}
}

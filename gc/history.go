package gc

import "github.com/wrapup-dev/wrapup/gc/decision"

// RecordName is decision.RecordName, the name of an AppWrapper's
// CompletionRecord.
func RecordName(name, uid string) string { return decision.RecordName(name, uid) }

package dynamostore

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"spaces/shared/space"
)

// Who made a write travels on the item itself (changed_by, request_id) so
// that the table's stream record of the write carries it to the audit trail
// (activity.go): an entry is then derived from the stored change alone, and
// a function that dies after its write loses none. Only the items the trail
// reads are stamped (a space, an account, a revision, a job), not the
// claims, counters and links written beside them.

// stampItem records ctx's stamp on an item that is put whole; an item put
// without one (a write of Spaces itself) carries none, since the put
// replaces the item.
func stampItem(ctx context.Context, item map[string]types.AttributeValue) {
	st, _ := space.StampOf(ctx)
	if st.Subject != "" {
		item[attrChangedBy] = str(st.Subject)
	}
	if st.RequestID != "" {
		item[attrRequestID] = str(st.RequestID)
	}
}

// stampUpdate gives an UpdateItem ctx's stamp: the SET terms to add for
// what the stamp holds and the REMOVE terms for what it does not. An update
// leaves what it does not name, and the table's stream filter takes a
// MODIFY whose new image has a request_id for a request's write, so a write
// of Spaces itself (a probe's) must not keep the last request's.
func stampUpdate(ctx context.Context, nm map[string]string, vals map[string]types.AttributeValue) (set, remove []string) {
	st, _ := space.StampOf(ctx)
	nm["#chby"], nm["#chrq"] = attrChangedBy, attrRequestID
	for _, f := range []struct{ name, value, ph string }{{"#chby", st.Subject, ":chby"}, {"#chrq", st.RequestID, ":chrq"}} {
		if f.value == "" {
			remove = append(remove, f.name)
			continue
		}
		vals[f.ph] = str(f.value)
		set = append(set, f.name+" = "+f.ph)
	}
	return set, remove
}

package webhooks

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-lambda-go/events"
)

// Lambda is the one function's handler for both its event sources: the
// table's stream (the fan-out) and the delivery queue (the attempts). A
// record's eventSource tells them apart.
func Lambda(f *Fanout, d *Deliverer) func(ctx context.Context, raw json.RawMessage) (any, error) {
	return func(ctx context.Context, raw json.RawMessage) (any, error) {
		var probe struct {
			Records []struct {
				EventSource string `json:"eventSource"`
			} `json:"Records"`
		}
		if err := json.Unmarshal(raw, &probe); err != nil {
			return nil, err
		}
		if len(probe.Records) == 0 {
			return events.SQSEventResponse{}, nil
		}
		switch src := probe.Records[0].EventSource; src {
		case "aws:dynamodb":
			var ev events.DynamoDBEvent
			if err := json.Unmarshal(raw, &ev); err != nil {
				return nil, err
			}
			return f.HandleStream(ctx, ev)
		case "aws:sqs":
			var ev events.SQSEvent
			if err := json.Unmarshal(raw, &ev); err != nil {
				return nil, err
			}
			return d.HandleSQS(ctx, ev)
		default:
			return nil, fmt.Errorf("unexpected event source %q", src)
		}
	}
}

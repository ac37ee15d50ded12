package emulator

import (
	"encoding/json"
	"fmt"

	"github.com/awslabs/goformation/v7/intrinsics"
)

// StreamSource is a function's DynamoDB stream event source as the template
// declares it: what Lambda's event source mapping does with the stream, read
// so that the local stack does the same (goformation's typed model has no
// FilterCriteria or FunctionResponseTypes, so the processed JSON is read).
type StreamSource struct {
	// Table is the logical id of the table whose stream it reads.
	Table                      string
	StartingPosition           string
	BatchSize                  int
	BisectBatchOnFunctionError bool
	MaximumRetryAttempts       int
	ReportBatchItemFailures    bool
	// Patterns are the FilterCriteria patterns (JSON); a record passes when
	// any matches, none means every record passes.
	Patterns []string
	// OnFailure is the logical id of the failure destination (an SQS queue).
	OnFailure string
}

// FunctionStreamSource returns the DynamoDB event source named event of the
// function with logical id function.
func FunctionStreamSource(template []byte, function, event string) (StreamSource, error) {
	opts := &intrinsics.ProcessorOptions{IntrinsicHandlerOverrides: map[string]intrinsics.IntrinsicHandler{
		"Ref": ref, "Fn::GetAtt": getAtt, "Fn::Sub": sub,
	}}
	parseMu.Lock()
	processed, err := intrinsics.ProcessYAML(template, opts)
	parseMu.Unlock()
	if err != nil {
		return StreamSource{}, fmt.Errorf("emulator: parse template: %w", err)
	}
	var doc struct {
		Resources map[string]struct {
			Type       string
			Properties struct {
				Events map[string]struct {
					Type       string
					Properties struct {
						Stream                     string
						StartingPosition           string
						BatchSize                  *int
						BisectBatchOnFunctionError bool
						MaximumRetryAttempts       *int
						FunctionResponseTypes      []string
						FilterCriteria             struct {
							Filters []struct{ Pattern string }
						}
						DestinationConfig struct {
							OnFailure struct {
								Type        string
								Destination string
							}
						}
					}
				}
			}
		}
	}
	if err := json.Unmarshal(processed, &doc); err != nil {
		return StreamSource{}, fmt.Errorf("emulator: parse template: %w", err)
	}
	fn, ok := doc.Resources[function]
	if !ok || fn.Type != "AWS::Serverless::Function" {
		return StreamSource{}, fmt.Errorf("emulator: the template has no function %s", function)
	}
	ev, ok := fn.Properties.Events[event]
	if !ok || ev.Type != "DynamoDB" {
		return StreamSource{}, fmt.Errorf("emulator: function %s has no DynamoDB event %s", function, event)
	}
	p := ev.Properties
	tokenID := func(what, v string) (string, error) {
		m := tokenPattern.FindStringSubmatch(v)
		if m == nil || m[0] != v {
			return "", fmt.Errorf("emulator: %s.%s: %s %q is not a reference to a resource of the template", function, event, what, v)
		}
		return m[2], nil
	}
	src := StreamSource{
		StartingPosition:           p.StartingPosition,
		BatchSize:                  100, // Lambda's default for streams
		BisectBatchOnFunctionError: p.BisectBatchOnFunctionError,
		MaximumRetryAttempts:       -1, // Lambda's default: until the record expires
	}
	if p.BatchSize != nil {
		src.BatchSize = *p.BatchSize
	}
	if p.MaximumRetryAttempts != nil {
		src.MaximumRetryAttempts = *p.MaximumRetryAttempts
	}
	for _, t := range p.FunctionResponseTypes {
		if t == "ReportBatchItemFailures" {
			src.ReportBatchItemFailures = true
		}
	}
	for _, f := range p.FilterCriteria.Filters {
		src.Patterns = append(src.Patterns, f.Pattern)
	}
	if src.Table, err = tokenID("Stream", p.Stream); err != nil {
		return StreamSource{}, err
	}
	if d := p.DestinationConfig.OnFailure.Destination; d != "" {
		if src.OnFailure, err = tokenID("OnFailure destination", d); err != nil {
			return StreamSource{}, err
		}
	}
	return src, nil
}

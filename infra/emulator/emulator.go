// Package emulator runs the embedded AWS emulator (kumo) in-process and
// creates in it the resources a SAM/CloudFormation template declares, so that
// the local stack and the tests run against exactly what template.yaml
// deploys to AWS.
//
// kumo's services are process-global: every Emulator started in one process
// shares the same tables, queues and buses. Callers that need isolation give
// each user its own physical names (see CreateResources' names argument).
//
// # Persistence
//
// kumo, as patched by infra/emulator/kumo, writes nothing to disk unless the
// process asks for it: only the local stack does (Options.Persist), into
// KUMO_DATA_DIR, which kumo reads once at process start. Tests never persist,
// whatever the environment says. A persisting emulator writes every change
// to disk before it answers the request that made it, as DynamoDB and SQS
// acknowledge only durable writes, so a crash of the local stack loses no
// write it acknowledged: items, the tables' stream records (numbered on
// after a restart) and messages, those in flight included
// (TestStreamRecordsAndInFlightMessagesSurviveARestart). Check tells
// whether the running kumo is the patched one.
package emulator

import (
	"context"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/sivchari/kumo"
)

// Region and AccountID are the emulator's fixed region and account: kumo
// builds its ARNs with them, and templates see them as AWS::Region and
// AWS::AccountId.
const (
	Region    = "us-east-1"
	AccountID = "000000000000"
)

// DataDirEnv names the folder a persisting emulator keeps its state in;
// kumo reads it once, when the process starts. PersistEnv="1" lets the
// patched kumo write there.
const (
	DataDirEnv = "KUMO_DATA_DIR"
	PersistEnv = "KUMO_PERSIST"
)

// Options configure an emulator.
type Options struct {
	// Persist writes the emulator's state to $KUMO_DATA_DIR, durably before
	// each answer. Without it, or without the variable, the state lives in
	// memory only.
	Persist bool
}

// Emulator is one in-process kumo server.
type Emulator struct {
	// URL is the server's base URL, the BaseEndpoint for every client.
	URL string
	// DataDir is where the state is persisted ("" when in memory only).
	DataDir string

	srv *kumo.Server
	cfg aws.Config
}

// Start starts an in-memory emulator on a random loopback port.
func Start(ctx context.Context) (*Emulator, error) { return StartWith(ctx, Options{}) }

// StartWith starts an emulator with the given options.
func StartWith(ctx context.Context, o Options) (*Emulator, error) {
	dir := ""
	if o.Persist {
		if dir = os.Getenv(DataDirEnv); dir != "" {
			// kumo's services are process-global; so is this switch. Only
			// the local stack's process sets it.
			if err := os.Setenv(PersistEnv, "1"); err != nil {
				return nil, err
			}
		}
	}
	srv := kumo.NewServer()
	cfg, err := LoadConfig(ctx, srv.URL)
	if err != nil {
		srv.Close()
		return nil, err
	}
	return &Emulator{URL: srv.URL, DataDir: dir, srv: srv, cfg: cfg}, nil
}

// Config is an SDK configuration pointed at the emulator.
func (e *Emulator) Config() aws.Config { return e.cfg.Copy() }

// Close stops the server. The process-global data stays.
func (e *Emulator) Close() { e.srv.Close() }

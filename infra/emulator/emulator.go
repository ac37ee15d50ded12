// Package emulator runs the embedded AWS emulator (kumo) in-process and
// creates in it the resources a SAM/CloudFormation template declares, so that
// the local stack and the tests run against exactly what template.yaml
// deploys to AWS.
//
// kumo's services are process-global: every Emulator started in one process
// shares the same tables, queues and buses. Callers that need isolation give
// each user its own physical names (see CreateResources' names argument).
package emulator

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/sivchari/kumo"

	"spaces/shared/awsclient"
)

// Region and AccountID are the emulator's fixed region and account: kumo
// builds its ARNs with them, and templates see them as AWS::Region and
// AWS::AccountId.
const (
	Region    = "us-east-1"
	AccountID = "000000000000"
)

// Emulator is one in-process kumo server.
type Emulator struct {
	// URL is the server's base URL, the BaseEndpoint for every client.
	URL string

	srv *kumo.Server
	cfg aws.Config
}

// Start starts an emulator on a random loopback port.
func Start(ctx context.Context) (*Emulator, error) {
	srv := kumo.NewServer()
	cfg, err := awsclient.Load(ctx, awsclient.Options{Endpoint: srv.URL, Region: Region})
	if err != nil {
		srv.Close()
		return nil, err
	}
	return &Emulator{URL: srv.URL, srv: srv, cfg: cfg}, nil
}

// Config is an SDK configuration pointed at the emulator.
func (e *Emulator) Config() aws.Config { return e.cfg.Copy() }

// Close stops the server. The process-global data stays.
func (e *Emulator) Close() { e.srv.Close() }

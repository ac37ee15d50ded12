// Command spaces is the Spaces command line: package cli, run with the
// process's arguments, streams and environment. Built by make (bin/spaces).
package main

import (
	"context"
	"os"
	"os/signal"

	"spaces/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := cli.Main(ctx, os.Args[1:], cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
	stop()
	os.Exit(code)
}

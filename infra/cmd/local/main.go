// Command local runs the whole Spaces service on this machine: `make run`.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"spaces/infra/local"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := local.Config{Log: log}
	if addr := os.Getenv("SPACES_ADDR"); addr != "" {
		cfg.APIAddr = addr
	}
	st, err := local.Start(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "spaces: cannot start:", err)
		os.Exit(1)
	}
	token, err := st.Signer.Mint("acme", "dev", nil, 12*time.Hour)
	if err != nil {
		fmt.Fprintln(os.Stderr, "spaces: cannot mint a token:", err)
		os.Exit(1)
	}
	fmt.Printf(`
Spaces is running.

  API           %[1]s   (OpenAPI: %[1]s/openapi.yaml)
  AWS emulator  %[2]s   (aws --endpoint-url %[2]s dynamodb scan --table-name SpacesTable)
  data          .local/ (delete it to start empty)

A token for org "acme", valid 12 hours (more with: make token ORG=<org> [SCOPE=spaces:internal]):

  export TOKEN=%[3]s

Try:

  curl -s -H "Authorization: Bearer $TOKEN" %[1]s/spaces

Stop with Ctrl-C.
`, st.APIURL, st.PublicURL, token)
	select {
	case <-ctx.Done():
	case err := <-st.Err():
		log.Error("listener stopped", "error", err)
	}
	fmt.Println("\nstopping…")
	st.Close()
}

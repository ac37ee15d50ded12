// Command terraform-provider-spaces serves the Spaces provider to
// Terraform or OpenTofu (package terraform).
package main

import (
	"context"
	"flag"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"spaces/terraform"
)

// version is set at build time (-ldflags "-X main.version=…").
var version = "dev"

func main() {
	debug := flag.Bool("debug", false, "run with support for debuggers (delve)")
	flag.Parse()
	err := providerserver.Serve(context.Background(), terraform.New(version), providerserver.ServeOpts{
		Address: "registry.terraform.io/spaces/spaces",
		Debug:   *debug,
	})
	if err != nil {
		log.Fatal(err)
	}
}

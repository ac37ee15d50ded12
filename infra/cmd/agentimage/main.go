// Command agentimage is make agent-image: it builds the agent's container
// image with ko, without Docker, into an OCI layout, and renders the
// agent's manifests for it.
//
// ko takes its base image from a registry. This machine reaches no image
// registry, and the agent needs almost nothing from a base: so the base
// is made here (no files but the host's CA bundle, for the agent's HTTPS
// calls, and /etc/passwd naming the non-root user 65532 it runs as) and
// served to ko from an in-memory registry on loopback for the build's
// duration (go-containerregistry's, which ko itself is built on).
//
//	go run ./infra/cmd/agentimage -out .local/agent -repo REPO -agent-url URL -ko github.com/google/ko@vX
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/crane"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"spaces/agent/manifests"
)

func main() {
	out := flag.String("out", ".local/agent", "folder for the OCI layout (oci/) and the manifests (spaces-agent.yaml)")
	repo := flag.String("repo", "", "the repository the image will be pushed to; the manifests name it by digest")
	agentURL := flag.String("agent-url", "", "base URL of Spaces' agent routes, as the agent will call it (the stack's AgentUrl output)")
	ko := flag.String("ko", "", "ko's module at a pinned version, run with go run")
	platforms := flag.String("platforms", "linux/amd64,linux/arm64", "the image's platforms")
	caFile := flag.String("ca-file", "/etc/ssl/certs/ca-certificates.crt", "the CA bundle the base image carries")
	optIn := flag.String("opt-in", "", "comma-separated namespaces the agent may apply revisions in (a RoleBinding each); none: it applies nowhere until one is opted in")
	flag.Parse()
	if *repo == "" || *agentURL == "" || *ko == "" {
		log.Fatal("-repo, -agent-url and -ko are required")
	}
	var namespaces []string
	if *optIn != "" {
		namespaces = strings.Split(*optIn, ",")
	}
	if err := run(*out, *repo, *agentURL, *ko, *platforms, *caFile, namespaces); err != nil {
		log.Fatal(err)
	}
}

// fixedAddr is where the base image is served during a build.
const fixedAddr = "127.0.0.1:39517"

func run(out, repo, agentURL, ko, platforms, caFile string, optIn []string) error {
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return fmt.Errorf("the base image's CA bundle: %w", err)
	}
	// ko records the base's name, port included, in the image's
	// annotations: a fixed port keeps the digest the same from one build
	// to the next (a busy one falls back to any port, and says so).
	ln, err := net.Listen("tcp", fixedAddr)
	if err != nil {
		log.Printf("%s is busy (%v): the base image is served from another port, so the image digest differs from a build on %s", fixedAddr, err, fixedAddr)
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return err
		}
	}
	srv := &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0))), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	base, err := name.ParseReference(ln.Addr().String() + "/spaces-agent-base:static")
	if err != nil {
		return err
	}
	idx, err := baseIndex(ca, strings.Split(platforms, ","))
	if err != nil {
		return err
	}
	if err := remote.WriteIndex(base, idx); err != nil {
		return fmt.Errorf("push the base image to the loopback registry: %w", err)
	}

	layoutDir := filepath.Join(out, "oci")
	if err := os.RemoveAll(layoutDir); err != nil {
		return err
	}
	cmd := exec.Command("go", "run", ko, "build", "--bare", "--push=false", "--sbom=none",
		"--oci-layout-path="+layoutDir, "--platform="+platforms, "./agent/cmd/spaces-agent")
	cmd.Env = append(os.Environ(), "GOFLAGS=", "KO_DOCKER_REPO="+repo, "KO_DEFAULTBASEIMAGE="+base.String(),
		"SOURCE_DATE_EPOCH=0")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ko build: %w", err)
	}

	// The layout's one entry is the image (an index, one per platform).
	lp, err := layout.FromPath(layoutDir)
	if err != nil {
		return err
	}
	ii, err := lp.ImageIndex()
	if err != nil {
		return err
	}
	im, err := ii.IndexManifest()
	if err != nil {
		return err
	}
	if len(im.Manifests) != 1 {
		return fmt.Errorf("the layout holds %d images, want 1", len(im.Manifests))
	}
	image := repo + "@" + im.Manifests[0].Digest.String()
	rendered, err := manifests.Render(manifests.Values{Image: image, AgentURL: agentURL, OptIn: optIn})
	if err != nil {
		return err
	}
	file := filepath.Join(out, "spaces-agent.yaml")
	if err := os.WriteFile(file, rendered, 0o644); err != nil {
		return err
	}
	fmt.Printf("image     %s (OCI layout %s; push it to %s)\nmanifests %s\n", image, layoutDir, repo, file)
	return nil
}

// baseIndex is the base image, one per platform: the CA bundle and the
// non-root user, nothing else (no shell, no package manager).
func baseIndex(ca []byte, platforms []string) (v1.ImageIndex, error) {
	files, err := crane.Layer(map[string][]byte{
		"etc/ssl/certs/ca-certificates.crt": ca,
		"etc/passwd":                        []byte("nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"),
		"etc/group":                         []byte("nonroot:x:65532:\n"),
	})
	if err != nil {
		return nil, err
	}
	var idx v1.ImageIndex = empty.Index
	for _, p := range platforms {
		plat, err := v1.ParsePlatform(p)
		if err != nil {
			return nil, err
		}
		img, err := mutate.AppendLayers(empty.Image, files)
		if err != nil {
			return nil, err
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		cf = cf.DeepCopy()
		cf.OS, cf.Architecture, cf.Variant = plat.OS, plat.Architecture, plat.Variant
		cf.Config.User = "65532:65532"
		if img, err = mutate.ConfigFile(img, cf); err != nil {
			return nil, err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: plat}})
	}
	return idx, nil
}

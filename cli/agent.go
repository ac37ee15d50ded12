package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"spaces/agent/install"
	"spaces/agent/manifests"
	"spaces/client"
)

// fieldManager names the CLI's server-side applies.
const fieldManager = "spaces-cli"

func agentCmd(a *app) *cobra.Command {
	var kubeconfig, kubeContext, image, agentURL string
	installCmd := &cobra.Command{
		Use:   "install SPACE_ID --context CONTEXT --image IMAGE --agent-url URL",
		Short: "Install the agent of an agent space in its cluster",
		Long: `Install the agent of an agent space (registered with --connectivity agent)
in its cluster: a new bootstrap token is asked for (the one registration
answered, and any earlier one, stop working), and the agent's manifests
(its namespace, ServiceAccount, RBAC, the bootstrap Secret and its
Deployment) are applied with server-side apply to the kubeconfig context
--context, as kubectl apply --server-side would. The token goes from the
API into the Secret only: it is never printed nor on a command line.

--image is the agent's image (make agent-image prints it); --agent-url is
where the agent calls Spaces (the stack's AgentUrl output; the local stack's
is http://127.0.0.1:8081). The space turns active once the agent renews its
lease: 'spaces wait SPACE_ID --for status=active'.`,
		Example: `  spaces agent install 6f1c7a52-3f8e-4c1e-9a57-2b1f0c9d8e11 --context kind-private \
    --image registry.example/spaces-agent@sha256:… --agent-url https://abc.lambda-url.eu-west-1.on.aws
  spaces wait 6f1c7a52-3f8e-4c1e-9a57-2b1f0c9d8e11 --for status=active`,
		Args:              exactArgs(1, "one space id"),
		ValidArgsFunction: a.completeSpaces,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireFlags(cmd, "context", "image", "agent-url"); err != nil {
				return err
			}
			rc, err := install.RESTConfig(kubeconfig, kubeContext)
			if err != nil {
				return err
			}
			api, err := a.api()
			if err != nil {
				return err
			}
			r, err := client.Result(api.ReissueAgentBootstrapWithResponse(cmd.Context(), args[0], nil))
			if err != nil {
				return err
			}
			boot := r.JSON201
			if boot == nil {
				return fmt.Errorf("the API answered %d without a bootstrap", r.StatusCode())
			}
			rendered, err := manifests.Render(manifests.Values{Image: image, AgentURL: agentURL,
				BootstrapToken: boot.Token, BootstrapExpires: boot.ExpiresAt.UTC().Truncate(time.Second)})
			if err != nil {
				return err
			}
			if err := install.Apply(cmd.Context(), rc, rendered, fieldManager, func(o install.Object) {
				fmt.Fprintf(cmd.OutOrStdout(), "%s/%s applied\n", o.Kind, o.Name)
			}); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "agent of space %s installed in context %s; it turns active once the agent renews its lease: spaces wait %s --for status=active\n",
				args[0], kubeContext, args[0])
			return nil
		},
	}
	f := installCmd.Flags()
	f.StringVar(&kubeContext, "context", "", "the kubeconfig context of the space's cluster")
	f.StringVar(&kubeconfig, "kubeconfig", "", "the kubeconfig file (default $KUBECONFIG, else ~/.kube/config)")
	f.StringVar(&image, "image", "", "the agent's image reference")
	f.StringVar(&agentURL, "agent-url", "", "where the agent calls Spaces (the stack's AgentUrl output)")
	return group("agent", "The in-cluster agent of agent spaces", `  spaces agent install 6f1c… --context kind-private --image … --agent-url …`, installCmd)
}

package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/component-base/cli"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/plugin"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
)

func init() {
	register(command{
		name:  "kubectl",
		short: "the real kubectl (k8s.io/kubectl), built in: svcnet kubectl ARGS...; also runs as `kubectl` through a link named kubectl",
		run:   runKubectl,
	})
}

// runKubectl is kubectl's own main (k8s.io/kubernetes/cmd/kubectl) with the
// arguments after `svcnet kubectl`. `kubectl version` reports the release
// set at link time, as in Kubernetes' own build (scripts/install.sh passes
// -X k8s.io/component-base/version.gitVersion=v1.37.2, gitMajor=1,
// gitMinor=37 from the k8s.io/kubectl module version; a plain `go build`
// reports kubectl's placeholder v0.0.0-master).
func runKubectl(_ context.Context, args []string) error {
	// kubectl handles Ctrl-C itself where it matters (exec, port-forward);
	// elsewhere it must end as the real one does.
	signal.Reset(os.Interrupt, syscall.SIGTERM)
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	command := kubectlcmd.NewDefaultKubectlCommandWithArgs(kubectlcmd.KubectlOptions{
		PluginHandler: kubectlcmd.NewDefaultPluginHandler(plugin.ValidPluginFilenamePrefixes),
		Arguments:     append([]string{"kubectl"}, args...),
		ConfigFlags:   genericclioptions.NewConfigFlags(true).WithDeprecatedPasswordFlag().WithDiscoveryBurst(300).WithDiscoveryQPS(50.0).WithWarningPrinter(streams),
		IOStreams:     streams,
	})
	command.SetArgs(args)
	if err := cli.RunNoErrOutput(command); err != nil {
		cmdutil.CheckErr(err) // prints as kubectl does and exits
	}
	return nil
}

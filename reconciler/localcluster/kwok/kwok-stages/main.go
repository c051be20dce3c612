// Command stages prints the pod and node lifecycle stages the local cluster's
// kwok runs: the ones kwok itself ships as its fast defaults (nodes become
// Ready and renew their Lease; pods become Running and Ready, Jobs' pods
// complete, deleted pods go away), as one multi-document YAML stream for
// kwok's --config flag.
package main

import (
	"fmt"
	"os"
	"strings"

	nodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	nodelease "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat-with-lease"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
)

func main() {
	docs := []string{
		nodefast.DefaultNodeInit,
		nodelease.DefaultNodeHeartbeatWithLease,
		podfast.DefaultPodReady,
		podfast.DefaultPodComplete,
		podfast.DefaultPodDelete,
	}
	for i, doc := range docs {
		if i > 0 {
			fmt.Fprintln(os.Stdout, "---")
		}
		fmt.Fprintln(os.Stdout, strings.TrimSpace(doc))
	}
}

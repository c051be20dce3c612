// Command fluxssa applies the objects of YAML files as Flux's kustomize-controller does, with the
// server-side apply engine of github.com/fluxcd/pkg/ssa: ApplyAllStaged (CRDs and namespaces first, a
// dry-run and comparison per object, only what differs applied), then, with -wait, WaitForSet (kstatus).
// It prints the change set's counts. The peer of the reconciler's no-op and apply benchmarks.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling"
	"github.com/fluxcd/pkg/ssa"
	"github.com/fluxcd/pkg/ssa/utils"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file")
	fieldManager := flag.String("field-manager", "fluxssa", "server-side apply field manager")
	wait := flag.Bool("wait", false, "wait until every applied object is Current (kstatus)")
	timeout := flag.Duration("timeout", 5*time.Minute, "how long -wait waits")
	concurrency := flag.Int("concurrency", 4, "objects dry-run and applied at once (kustomize-controller's default)")
	flag.Parse()
	if err := run(*kubeconfig, *fieldManager, *wait, *timeout, *concurrency, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "fluxssa:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, fieldManager string, wait bool, timeout time.Duration, concurrency int, files []string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 50, 300 // kustomize-controller's --kube-api-qps and --kube-api-burst defaults
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return err
	}
	kube, err := client.New(cfg, client.Options{Mapper: mapper, HTTPClient: httpClient})
	if err != nil {
		return err
	}
	manager := ssa.NewResourceManager(kube, polling.NewStatusPoller(kube, mapper, polling.Options{}),
		ssa.Owner{Field: fieldManager, Group: "bench.reconciler.dev"})
	manager.SetConcurrency(concurrency)
	var objects []*unstructured.Unstructured
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		read, err := utils.ReadObjects(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		objects = append(objects, read...)
	}
	ctx := context.Background()
	changes, err := manager.ApplyAllStaged(ctx, objects, ssa.DefaultApplyOptions())
	if err != nil {
		return err
	}
	if wait {
		opts := ssa.DefaultWaitOptions()
		opts.Interval, opts.Timeout = 2*time.Second, timeout // kustomize-controller polls every 2 s
		if err := manager.WaitForSet(changes.ToObjMetadataSet(), opts); err != nil {
			return err
		}
	}
	counts := map[string]int{}
	for _, e := range changes.Entries {
		counts[string(e.Action)]++
	}
	fmt.Println(counts)
	return nil
}

package main

// The kube-controller-manager controllers a Deployment rollout needs, run
// in process against the apiserver (--controllers). They are the real
// controller packages from k8s.io/kubernetes, wired up the way
// cmd/kube-controller-manager/app wires them, minus its flag, leader
// election and per-controller service-account machinery: all of them use
// the admin client.

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	cacheddiscovery "k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/controller-manager/pkg/informerfactory"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/deployment"
	"k8s.io/kubernetes/pkg/controller/disruption"
	"k8s.io/kubernetes/pkg/controller/endpointslice"
	"k8s.io/kubernetes/pkg/controller/garbagecollector"
	namespacecontroller "k8s.io/kubernetes/pkg/controller/namespace"
	"k8s.io/kubernetes/pkg/controller/replicaset"
	"k8s.io/kubernetes/pkg/controller/serviceaccount"
)

// knownControllers are the names --controllers accepts (the names
// kube-controller-manager's --controllers flag uses for them).
var knownControllers = []string{
	"deployment", "replicaset", "endpointslice", "disruption",
	"garbagecollector", "serviceaccount", "namespace",
}

// parseControllers turns "a,b" (or "all") into a sorted, checked list.
func parseControllers(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	if s == "all" {
		return slices.Clone(knownControllers), nil
	}
	var out []string
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if !slices.Contains(knownControllers, name) {
			return nil, fmt.Errorf("--controllers: unknown controller %q (known: %s, or all)", name, strings.Join(knownControllers, ","))
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// startControllers builds the named controllers, starts the shared
// informers and runs every controller until ctx ends. It returns once all
// informer caches have synced, so callers can announce readiness after it.
func startControllers(ctx context.Context, kubeconfig string, names []string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	// One client for everything; the defaults (5 QPS) would make a
	// rollout crawl.
	cfg.QPS, cfg.Burst = 200, 400
	cfg.UserAgent = "testapiserver-controllers"
	client, err := clientset.NewForConfig(cfg)
	if err != nil {
		return err
	}
	metadataClient, err := metadata.NewForConfig(cfg)
	if err != nil {
		return err
	}

	// Resync 0: the controllers react to watch events; a periodic resync
	// only adds load on a 2-core CI machine.
	shared := informers.NewSharedInformerFactory(client, 0)
	metadataInformers := metadatainformer.NewSharedInformerFactory(metadataClient, 0)
	objectOrMetadata := informerfactory.NewInformerFactory(shared, metadataInformers)

	restMapper := restmapper.NewDeferredDiscoveryRESTMapper(cacheddiscovery.NewMemCacheClient(client.Discovery()))
	// New CRDs (e.g. the Gateway API's) become mappable within seconds.
	go wait.Until(restMapper.Reset, 10*time.Second, ctx.Done())
	informersStarted := make(chan struct{})

	var runs []func(context.Context)
	for _, name := range names {
		switch name {
		case "deployment":
			dc, err := deployment.NewDeploymentController(ctx,
				shared.Apps().V1().Deployments(), shared.Apps().V1().ReplicaSets(), shared.Core().V1().Pods(), client)
			if err != nil {
				return fmt.Errorf("deployment: %w", err)
			}
			runs = append(runs, func(ctx context.Context) { dc.Run(ctx, 5) })
		case "replicaset":
			rsc := replicaset.NewReplicaSetController(ctx,
				shared.Apps().V1().ReplicaSets(), shared.Core().V1().Pods(), client, replicaset.BurstReplicas)
			runs = append(runs, func(ctx context.Context) { rsc.Run(ctx, 5) })
		case "endpointslice":
			ec := endpointslice.NewController(ctx,
				shared.Core().V1().Pods(), shared.Core().V1().Services(), shared.Core().V1().Nodes(),
				shared.Discovery().V1().EndpointSlices(), 100, client, 0)
			runs = append(runs, func(ctx context.Context) { ec.Run(ctx, 5) })
		case "disruption":
			scaleClient, err := scale.NewForConfig(cfg, restMapper, dynamic.LegacyAPIPathResolverFunc,
				scale.NewDiscoveryScaleKindResolver(client.Discovery()))
			if err != nil {
				return fmt.Errorf("disruption: %w", err)
			}
			dc := disruption.NewDisruptionController(ctx,
				shared.Core().V1().Pods(), shared.Policy().V1().PodDisruptionBudgets(),
				shared.Core().V1().ReplicationControllers(), shared.Apps().V1().ReplicaSets(),
				shared.Apps().V1().Deployments(), shared.Apps().V1().StatefulSets(),
				client, restMapper, scaleClient, client.Discovery())
			runs = append(runs, dc.Run)
		case "serviceaccount":
			sc, err := serviceaccount.NewServiceAccountsController(klog.FromContext(ctx),
				shared.Core().V1().ServiceAccounts(), shared.Core().V1().Namespaces(), client,
				serviceaccount.DefaultServiceAccountsControllerOptions())
			if err != nil {
				return fmt.Errorf("serviceaccount: %w", err)
			}
			runs = append(runs, func(ctx context.Context) { sc.Run(ctx, 2) })
		case "namespace":
			// Namespace deletion is a burst of discovery and delete calls;
			// KCM raises its limits the same way.
			nsCfg := rest.CopyConfig(cfg)
			nsCfg.QPS, nsCfg.Burst = 1000, 2000
			nsClient, err := clientset.NewForConfig(nsCfg)
			if err != nil {
				return fmt.Errorf("namespace: %w", err)
			}
			nsMetadata, err := metadata.NewForConfig(nsCfg)
			if err != nil {
				return fmt.Errorf("namespace: %w", err)
			}
			nc := namespacecontroller.NewNamespaceController(ctx, nsClient, nsMetadata,
				nsClient.Discovery().ServerPreferredNamespacedResources,
				shared.Core().V1().Namespaces(), 5*time.Minute, v1.FinalizerKubernetes)
			runs = append(runs, func(ctx context.Context) { nc.Run(ctx, 5) })
		case "garbagecollector":
			gc, err := garbagecollector.NewGarbageCollector(ctx, client, metadataClient, restMapper,
				map[schema.GroupResource]struct{}{{Group: "", Resource: "events"}: {}},
				objectOrMetadata, informersStarted)
			if err != nil {
				return fmt.Errorf("garbagecollector: %w", err)
			}
			// The GC needs an uncached discovery client of its own (see its Sync).
			gcClient, err := clientset.NewForConfig(cfg)
			if err != nil {
				return fmt.Errorf("garbagecollector: %w", err)
			}
			discoveryClient := gcClient.Discovery()
			const syncPeriod = 10 * time.Second
			runs = append(runs,
				func(ctx context.Context) { gc.Run(ctx, 5, syncPeriod) },
				func(ctx context.Context) { gc.Sync(ctx, discoveryClient, syncPeriod) })
		}
	}

	for _, run := range runs {
		go run(ctx)
	}
	shared.Start(ctx.Done())
	metadataInformers.Start(ctx.Done())
	close(informersStarted)
	for typ, ok := range shared.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("informer cache for %v did not sync", typ)
		}
	}
	logf("controllers running: %s", strings.Join(names, ","))
	return nil
}

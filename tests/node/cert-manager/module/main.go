// cert-manager for the node suite: its controller and its cainjector, from
// cert-manager's Go module, run as plain processes against the test control
// plane (tests/node/install.rs), so that the guide's install on plain
// Kubernetes meets the cert-manager it asks for.
//
// The controllers are cert-manager's own, and only those the gate's
// kubernetes overlay needs: Issuers (self-signed and CA), Certificates
// (trigger, key manager, request manager, issuing, readiness, revision
// manager) and CertificateRequests (approver, self-signed, CA). The ACME,
// Vault and Venafi issuers, the ingress and Gateway shims and the webhook
// are left out: the overlay uses none of them, and leaving them out keeps
// the cloud SDKs out of the build. The cainjector injects CA bundles into
// webhook configurations (cert-manager.io/inject-ca-from), as in a cluster.
//
//	cert-manager controller --kubeconfig FILE
//	cert-manager cainjector --kubeconfig FILE
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiext "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	kscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	apireg "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	cmscheme "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned/scheme"
	"github.com/cert-manager/cert-manager/pkg/controller"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	"github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	crca "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	crselfsigned "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	"github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
)

// The controllers this binary runs, by the names they register under.
var controllers = []string{
	issuers.ControllerName,
	trigger.ControllerName,
	keymanager.ControllerName,
	requestmanager.ControllerName,
	issuing.ControllerName,
	readiness.ControllerName,
	revisionmanager.ControllerName,
	approver.ControllerName,
	crselfsigned.CRControllerName,
	crca.CRControllerName,
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: cert-manager controller|cainjector --kubeconfig FILE")
		os.Exit(2)
	}
	flags := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	kubeconfig := flags.String("kubeconfig", "", "the kubeconfig to reach the API server with")
	_ = flags.Parse(os.Args[2:])
	if *kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "--kubeconfig is required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx = logf.NewContext(ctx, logf.Log, os.Args[1])
	var err error
	switch os.Args[1] {
	case "controller":
		err = runController(ctx, *kubeconfig)
	case "cainjector":
		err = runCAInjector(ctx, *kubeconfig)
	default:
		err = fmt.Errorf("unknown component %q", os.Args[1])
	}
	if err != nil {
		klog.ErrorS(err, "cert-manager stopped")
		os.Exit(1)
	}
}

func runController(ctx context.Context, kubeconfig string) error {
	factory, err := controller.NewContextFactory(ctx, controller.ContextOptions{
		Kubeconfig:         kubeconfig,
		KubernetesAPIQPS:   20,
		KubernetesAPIBurst: 50,
		IssuerOptions: controller.IssuerOptions{
			ClusterResourceNamespace: "kube-system",
		},
		CertificateOptions: controller.CertificateOptions{
			CertificateRequestMinimumBackoffDuration: time.Hour,
			CertificateRequestMaximumBackoffDuration: 32 * time.Hour,
		},
	})
	if err != nil {
		return err
	}
	known := controller.Known()
	var wg sync.WaitGroup
	failed := make(chan error, len(controllers))
	for _, name := range controllers {
		constructor, ok := known[name]
		if !ok {
			return fmt.Errorf("cert-manager has no controller %q", name)
		}
		loop, err := constructor(factory)
		if err != nil {
			return fmt.Errorf("controller %s: %w", name, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := loop.Run(5, ctx); err != nil {
				failed <- fmt.Errorf("controller %s: %w", name, err)
			}
		}()
	}
	// The informers are shared: started once every controller has asked
	// for the ones it needs.
	shared, err := factory.Build()
	if err != nil {
		return err
	}
	shared.SharedInformerFactory.Start(ctx.Done())
	shared.KubeSharedInformerFactory.Start(ctx.Done())
	shared.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())
	klog.InfoS("cert-manager controllers started", "controllers", controllers)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case err := <-failed:
		return err
	case <-done:
		return nil
	}
}

func runCAInjector(ctx context.Context, kubeconfig string) error {
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	config.UserAgent = "cainjector"
	scheme := runtime.NewScheme()
	utilruntime.Must(kscheme.AddToScheme(scheme))
	utilruntime.Must(cmscheme.AddToScheme(scheme))
	utilruntime.Must(apiext.AddToScheme(scheme))
	utilruntime.Must(apireg.AddToScheme(scheme))
	ctrl.SetLogger(logf.Log)
	manager, err := ctrl.NewManager(config, ctrl.Options{
		Scheme: scheme,
		// Secrets are read when needed, never all cached.
		Client: client.Options{Cache: &client.CacheOptions{
			DisableFor: []client.Object{&corev1.Secret{}},
		}},
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		return err
	}
	err = cainjector.RegisterAllInjectors(ctx, manager, cainjector.SetupOptions{
		EnableCertificatesDataSource: true,
		EnabledReconcilersFor: map[string]bool{
			cainjector.ValidatingWebhookConfigurationName: true,
			cainjector.MutatingWebhookConfigurationName:   true,
		},
	})
	if err != nil {
		return err
	}
	klog.InfoS("cert-manager cainjector started")
	return manager.Start(ctx)
}

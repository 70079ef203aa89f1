package devenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"k8s.io/client-go/rest"
)

// Address ranges of the cluster. Nothing routes or dials them (no kube-proxy: the Gateway and
// the aggregator reach endpoints, not ClusterIPs), but they are taken from the benchmarking range
// too (gateway.BenchmarkRange, the half PodCIDR and NodeIP are not in), so that no address of a
// private range appears anywhere in the environment.
const (
	serviceCIDR = "198.19.0.0/17"
	clusterCIDR = "198.19.128.0/17"
)

func (e *Env) bin(name string) string { return filepath.Join(e.opts.AssetsDir, name) }

// startEtcd runs a single-member etcd on two free loopback ports, without fsync.
func (e *Env) startEtcd(ctx context.Context) error {
	client, err := freePort()
	if err != nil {
		return err
	}
	peer, err := freePort()
	if err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(e.opts.Dir, "etcd-data")); err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	clientURL := "http://127.0.0.1:" + strconv.Itoa(client)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peer)
	p, err := e.launch(PartEtcd, []string{
		e.bin(PartEtcd),
		"--name=devenv",
		"--data-dir=" + filepath.Join(e.opts.Dir, "etcd-data"),
		"--listen-client-urls=" + clientURL,
		"--advertise-client-urls=" + clientURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=devenv=" + peerURL,
		"--initial-cluster-state=new",
		"--unsafe-no-fsync",
		"--log-level=warn",
	})
	if err != nil {
		return err
	}
	e.etcdURL = clientURL
	if err := waitFor(ctx, p, "etcd /health", e.opts.StartTimeout, httpGetOK(clientURL+"/health", "", nil)); err != nil {
		return partError(p, err)
	}
	return nil
}

// startAPIServer runs kube-apiserver on a free loopback port with the generated serving
// certificate, token-file authentication, RBAC, the ExtendedResourceToleration admission
// plugin and an aggregator ready for extension API servers (front-proxy certificates, routing
// to endpoints), then writes the kubeconfigs of the admin and of each part.
func (e *Env) startAPIServer(ctx context.Context) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	server := "https://127.0.0.1:" + strconv.Itoa(port)
	p, err := e.launch(PartAPIServer, []string{
		e.bin(PartAPIServer),
		"--etcd-servers=" + e.etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(e.opts.Dir, "certs", PartAPIServer),
		"--tls-cert-file=" + e.pki.caCert,
		"--tls-private-key-file=" + e.pki.caKey,
		"--token-auth-file=" + e.pki.tokenFile,
		"--authorization-mode=RBAC",
		"--service-account-key-file=" + e.pki.saPub,
		"--service-account-signing-key-file=" + e.pki.saKey,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range=" + serviceCIDR,
		// The endpoint reconciler refuses 127.0.0.1 and would make the server exit.
		"--endpoint-reconciler-type=none",
		// No token controller wait for pods; ExtendedResourceToleration lets GPU pods onto the
		// tainted GPU nodes (see the package doc).
		"--disable-admission-plugins=ServiceAccount",
		"--enable-admission-plugins=ExtendedResourceToleration",
		"--allow-privileged=true",
		"--profiling=false",
		// The aggregator, for extension API servers such as an external metrics adapter: it
		// proxies with the front-proxy client certificate and passes the user in headers, and
		// dials an APIService's endpoints directly (no kube-proxy routes a ClusterIP here).
		"--requestheader-client-ca-file=" + e.pki.frontProxyCA,
		"--requestheader-allowed-names=" + FrontProxyClientName,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + e.pki.proxyCert,
		"--proxy-client-key-file=" + e.pki.proxyKey,
		"--enable-aggregator-routing=true",
	})
	if err != nil {
		return err
	}
	if err := waitFor(ctx, p, "kube-apiserver /readyz", e.opts.StartTimeout, httpGetOK(server+"/readyz", e.pki.adminToken, e.pki.caPEM)); err != nil {
		return partError(p, err)
	}
	e.kubeconfig = filepath.Join(e.opts.Dir, "kubeconfig")
	if err := e.pki.writeKubeconfig(e.kubeconfig, server, "admin"); err != nil {
		return err
	}
	for _, user := range componentUsers[1:] {
		if err := e.pki.writeKubeconfig(e.componentKubeconfig(user), server, user); err != nil {
			return err
		}
	}
	e.restConfig = &rest.Config{
		Host:            server,
		BearerToken:     e.pki.adminToken,
		TLSClientConfig: rest.TLSClientConfig{CAData: e.pki.caPEM},
		QPS:             100,
		Burst:           200,
	}
	return nil
}

func (e *Env) componentKubeconfig(user string) string {
	return filepath.Join(e.opts.Dir, "pki", user+".kubeconfig")
}

// startControllerManager runs every default controller (Deployments, ReplicaSets, garbage
// collection, HPA, node lifecycle...) without leader election.
func (e *Env) startControllerManager(ctx context.Context) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	kc := e.componentKubeconfig(PartControllerManager)
	p, err := e.launch(PartControllerManager, []string{
		e.bin(PartControllerManager),
		"--kubeconfig=" + kc,
		"--authentication-kubeconfig=" + kc,
		"--authorization-kubeconfig=" + kc,
		"--controllers=*",
		"--service-account-private-key-file=" + e.pki.saKey,
		"--root-ca-file=" + e.pki.caCert,
		"--cluster-cidr=" + clusterCIDR,
		"--service-cluster-ip-range=" + serviceCIDR,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(e.opts.Dir, "certs", PartControllerManager),
		"--profiling=false",
	})
	if err != nil {
		return err
	}
	url := "https://127.0.0.1:" + strconv.Itoa(port) + "/healthz"
	if err := waitFor(ctx, p, "kube-controller-manager /healthz", e.opts.StartTimeout, httpGetOK(url, "", nil)); err != nil {
		return partError(p, err)
	}
	return nil
}

// startScheduler runs kube-scheduler without leader election.
func (e *Env) startScheduler(ctx context.Context) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	kc := e.componentKubeconfig(PartScheduler)
	p, err := e.launch(PartScheduler, []string{
		e.bin(PartScheduler),
		"--kubeconfig=" + kc,
		"--authentication-kubeconfig=" + kc,
		"--authorization-kubeconfig=" + kc,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(e.opts.Dir, "certs", PartScheduler),
		"--profiling=false",
	})
	if err != nil {
		return err
	}
	url := "https://127.0.0.1:" + strconv.Itoa(port) + "/healthz"
	if err := waitFor(ctx, p, "kube-scheduler /healthz", e.opts.StartTimeout, httpGetOK(url, "", nil)); err != nil {
		return partError(p, err)
	}
	return nil
}

// startKwok runs kwok with the stages of kwokStages, managing only the nodes annotated
// kwok.x-k8s.io/node=fake. Its readiness is checked on its /healthz; the nodes it brings up are
// waited for in createNodes.
func (e *Env) startKwok(ctx context.Context) error {
	stages, err := kwokStages(e.opts.AssetsDir, filepath.Join(e.opts.Dir, "kwok-stages"))
	if err != nil {
		return fmt.Errorf("kwok: %w", err)
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	argv := []string{
		e.bin(PartKwok),
		"--kubeconfig=" + e.componentKubeconfig(PartKwok),
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + kwokNodeAnnotation + "=fake",
		"--server-address=127.0.0.1:" + strconv.Itoa(port),
		// Renew a Lease per node, as a kubelet does, so that the node lifecycle controller
		// keeps the nodes Ready (without the flag kwok v0.8.0 keeps no lease).
		"--node-lease-duration-seconds=40",
		// Pod addresses from PodCIDR, routed inside the environment's network namespace (kwok's
		// default pool 10.0.0.0/24 is a private range), so that a process there serves each
		// pod on its own address and Traefik reaches it through the EndpointSlices.
		"--cidr=" + PodCIDR,
		"--node-ip=" + NodeIP,
	}
	for _, s := range stages {
		argv = append(argv, "-c", s)
	}
	p, err := e.launch(PartKwok, argv)
	if err != nil {
		return err
	}
	url := "http://127.0.0.1:" + strconv.Itoa(port) + "/healthz"
	if err := waitFor(ctx, p, "kwok /healthz", e.opts.StartTimeout, httpGetOK(url, "", nil)); err != nil {
		return partError(p, err)
	}
	return nil
}

// KwokStages are the kwok Stage files (in <AssetsDir>/kwok-stages) devenv runs kwok with:
// nodes become Ready at once and keep a lease; pods become Ready at once (those with readiness
// gates once their gates' conditions are True, see kwokStages), complete (Jobs) and go away when
// deleted. Other files there (chaos stages, test data) are not used.
var KwokStages = []string{"node-initialize.yaml", "node-heartbeat-with-lease.yaml", "pod-ready.yaml", "pod-complete.yaml", "pod-delete.yaml"}

package devenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// freePort asks the kernel for a free TCP port on 127.0.0.1. The port is released before it is
// used, so another program may take it in between; the parts fail with a clear error then.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0") //nolint:noctx // a port probe, closed at once
	if err != nil {
		return 0, fmt.Errorf("pick a free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// FreePort picks a free TCP port on 127.0.0.1, for a companion process whose address must be
// known before it starts (the fleet simulator's metrics port, given to Prometheus).
func FreePort() (int, error) { return freePort() }

// pki is the key material of one environment, as files under <Dir>/pki.
type pki struct {
	dir        string
	caCert     string // self-signed serving certificate of kube-apiserver, also its CA
	caKey      string
	caPEM      []byte
	saKey      string // service-account signing key (private), for apiserver and controller-manager
	saPub      string
	tokenFile  string
	adminToken string
	tokens     map[string]string // user name -> bearer token
	// The front proxy: kube-apiserver's aggregator presents proxyCert to extension API servers
	// (an external metrics adapter), which trust it through frontProxyCA, published in
	// kube-system/extension-apiserver-authentication.
	frontProxyCA string
	proxyCert    string
	proxyKey     string
}

// FrontProxyClientName is the common name of the client certificate the aggregator of
// kube-apiserver presents to extension API servers (--requestheader-allowed-names).
const FrontProxyClientName = "front-proxy-client"

// componentUsers are the identities in the token file; every one is in system:masters: this is a
// throw-away local cluster, and the parts' own RBAC roles would add nothing to test here.
var componentUsers = []string{"admin", "kube-controller-manager", "kube-scheduler", "kwok"}

// newPKI writes a serving certificate for 127.0.0.1/localhost, a service-account key pair and a
// token file with one admin token per component.
func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	p := &pki{
		dir:       dir,
		caCert:    filepath.Join(dir, "apiserver.crt"),
		caKey:     filepath.Join(dir, "apiserver.key"),
		saKey:     filepath.Join(dir, "sa.key"),
		saPub:     filepath.Join(dir, "sa.pub"),
		tokenFile: filepath.Join(dir, "tokens.csv"),
		tokens:    map[string]string{},
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pki: serving key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, fmt.Errorf("pki: serial: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "modelship-devenv-apiserver"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:              []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("pki: serving certificate: %w", err)
	}
	p.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("pki: serving key: %w", err)
	}
	if err := writeFiles(map[string][]byte{
		p.caCert: p.caPEM,
		p.caKey:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}); err != nil {
		return nil, err
	}

	sa, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("pki: service-account key: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("pki: service-account public key: %w", err)
	}
	if err := writeFiles(map[string][]byte{
		p.saKey: pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(sa)}),
		p.saPub: pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}),
	}); err != nil {
		return nil, err
	}

	var csv strings.Builder
	for _, user := range componentUsers {
		b := make([]byte, 24)
		if _, err := rand.Read(b); err != nil {
			return nil, fmt.Errorf("pki: token: %w", err)
		}
		tok := hex.EncodeToString(b)
		p.tokens[user] = tok
		// token,user,uid,"group1,group2"
		fmt.Fprintf(&csv, "%s,%s,%s,\"system:masters\"\n", tok, user, user)
	}
	p.adminToken = p.tokens["admin"]
	if err := writeFiles(map[string][]byte{p.tokenFile: []byte(csv.String())}); err != nil {
		return nil, err
	}
	if err := p.writeFrontProxy(); err != nil {
		return nil, err
	}
	return p, nil
}

// writeFrontProxy writes the front-proxy CA and the aggregator's client certificate signed by
// it (CN FrontProxyClientName), as kubeadm does. Only extension API servers use them.
func (p *pki) writeFrontProxy() error {
	p.frontProxyCA = filepath.Join(p.dir, "front-proxy-ca.crt")
	p.proxyCert = filepath.Join(p.dir, "front-proxy-client.crt")
	p.proxyKey = filepath.Join(p.dir, "front-proxy-client.key")
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("pki: front-proxy CA key: %w", err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "modelship-devenv-front-proxy-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("pki: front-proxy CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return fmt.Errorf("pki: front-proxy CA: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("pki: front-proxy client key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: FrontProxyClientName},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("pki: front-proxy client certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("pki: front-proxy client key: %w", err)
	}
	return writeFiles(map[string][]byte{
		p.frontProxyCA: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		p.proxyCert:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		p.proxyKey:     pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	})
}

func writeFiles(files map[string][]byte) error {
	for path, b := range files {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	return nil
}

// writeKubeconfig writes a kubeconfig for user (a token from the token file) to path.
func (p *pki) writeKubeconfig(path, server, user string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["modelship-dev"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: p.caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: p.tokens[user]}
	cfg.Contexts["modelship-dev"] = &clientcmdapi.Context{Cluster: "modelship-dev", AuthInfo: user, Namespace: "default"}
	cfg.CurrentContext = "modelship-dev"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}

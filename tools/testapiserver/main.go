// Command testapiserver runs a real kube-apiserver (compiled in from
// k8s.io/kubernetes) backed by an embedded etcd, bound to loopback only.
// It exists for ferryman's integration tests; see README.md.
//
// Usage:
//
//	testapiserver --dir DIR [--port N] [--etcd-compaction-interval 5m] [--controllers deployment,...] [--seed FILE] [-- EXTRA-KUBE-APISERVER-FLAGS...]
//
// Once /readyz answers 200 it prints exactly one line, KUBECONFIG=<path>,
// to stdout. Everything else (apiserver and etcd logs) goes to stderr.
// SIGTERM or SIGINT shuts both servers down and exits 0.
package main

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

const (
	loopback          = "127.0.0.1"
	serviceCIDR       = "10.96.0.0/16"
	serviceAccountIss = "https://kubernetes.default.svc.cluster.local"
)

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "testapiserver: "+format+"\n", args...)
}

func main() {
	os.Exit(run())
}

type options struct {
	dir                string
	port               int
	compactionInterval time.Duration
	readyTimeout       time.Duration
	etcdFsync          bool
	exitOnStdinClose   bool
	seed               string
	controllers        []string
	extraArgs          []string
}

func parseFlags() (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("testapiserver", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	fs.StringVar(&o.dir, "dir", "", "working directory for certificates, etcd data and the kubeconfig (required; reused if it already holds them)")
	fs.IntVar(&o.port, "port", 0, "secure port of the apiserver on 127.0.0.1; 0 picks a free one (the previous run's port is preferred when it is still free)")
	fs.DurationVar(&o.compactionInterval, "etcd-compaction-interval", 5*time.Minute, "passed to kube-apiserver --etcd-compaction-interval (0 disables compaction)")
	fs.DurationVar(&o.readyTimeout, "ready-timeout", 3*time.Minute, "give up (exit 1) if /readyz is not 200 within this time")
	fs.BoolVar(&o.etcdFsync, "etcd-fsync", false, "let etcd fsync its WAL/backend (off by default: faster, and data still survives a clean shutdown)")
	fs.BoolVar(&o.exitOnStdinClose, "exit-on-stdin-close", false, "shut down when stdin reaches EOF (lets a test harness that dies take the server with it)")
	fs.StringVar(&o.seed, "seed", "", "write the objects of this JSON stream (Ingress, Service, EndpointSlice) into etcd before the apiserver starts, as creates would store them (see seed.go)")
	controllers := fs.String("controllers", "", "comma list of kube-controller-manager controllers to run in process once the apiserver is ready ("+strings.Join(knownControllers, ",")+", or all); empty (default) runs none")
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: testapiserver --dir DIR [flags] [-- extra kube-apiserver flags]\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		return nil, err
	}
	o.extraArgs = fs.Args()
	var err error
	if o.controllers, err = parseControllers(*controllers); err != nil {
		return nil, err
	}
	if o.dir == "" {
		fs.Usage()
		return nil, errors.New("--dir is required")
	}
	if o.port < 0 || o.port > 65535 {
		return nil, fmt.Errorf("--port %d out of range", o.port)
	}
	abs, err := filepath.Abs(o.dir)
	if err != nil {
		return nil, err
	}
	o.dir = abs
	return o, nil
}

func run() int {
	o, err := parseFlags()
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		logf("%v", err)
		return 2
	}

	// NewAPIServerCommand installs the process' SIGTERM/SIGINT handler
	// (genericapiserver.SetupSignalContext, which may only be called once
	// per process); its context is cancelled on the first signal and a
	// second signal exits immediately. We reuse that context for
	// everything, so create the command before doing any real work.
	cmd := app.NewAPIServerCommand()
	ctx := cmd.Context()

	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		logf("%v", err)
		return 1
	}
	if err := lockDir(o.dir); err != nil {
		logf("%v", err)
		return 1
	}
	pki, err := ensurePKI(filepath.Join(o.dir, "pki"))
	if err != nil {
		logf("certificates: %v", err)
		return 1
	}

	statePath := filepath.Join(o.dir, "ports.json")
	st := loadState(statePath)
	if o.port != 0 {
		st.APIServer = o.port
	} else {
		st.APIServer = pickPort(st.APIServer)
	}
	st.EtcdClient = pickPort(st.EtcdClient)
	st.EtcdPeer = pickPort(st.EtcdPeer)
	for st.EtcdPeer == st.EtcdClient || st.EtcdPeer == st.APIServer || st.EtcdClient == st.APIServer {
		st.EtcdClient, st.EtcdPeer = pickPort(0), pickPort(0)
	}
	if st.EtcdClient == 0 || st.EtcdPeer == 0 || st.APIServer == 0 {
		logf("could not find free loopback ports")
		return 1
	}
	if err := writeJSON(statePath, st); err != nil {
		logf("%v", err)
		return 1
	}

	etcd, err := startEtcd(ctx, o, st)
	if err != nil {
		logf("etcd: %v", err)
		return 1
	}
	defer func() {
		etcd.Close()
		logf("etcd stopped")
	}()

	if o.seed != "" {
		began := time.Now()
		n, err := seed(ctx, etcd, o.seed)
		if err != nil {
			logf("--seed %s: %v", o.seed, err)
			return 1
		}
		logf("seeded %d objects in %s", n, time.Since(began).Round(time.Millisecond))
	}

	kubeconfig := filepath.Join(o.dir, "kubeconfig")
	if err := writeKubeconfig(kubeconfig, pki, st.APIServer); err != nil {
		logf("kubeconfig: %v", err)
		return 1
	}

	args := []string{
		"--advertise-address=" + loopback,
		"--bind-address=" + loopback,
		"--secure-port=" + strconv.Itoa(st.APIServer),
		"--cert-dir=" + pki.dir,
		"--tls-cert-file=" + pki.serverCert,
		"--tls-private-key-file=" + pki.serverKey,
		"--client-ca-file=" + pki.caCert,
		"--etcd-servers=http://" + net.JoinHostPort(loopback, strconv.Itoa(st.EtcdClient)),
		"--etcd-compaction-interval=" + o.compactionInterval.String(),
		"--service-account-issuer=" + serviceAccountIss,
		"--service-account-key-file=" + pki.saPub,
		"--service-account-signing-key-file=" + pki.saKey,
		"--service-cluster-ip-range=" + serviceCIDR,
		"--authorization-mode=RBAC",
		// Nothing runs on a node here: no kubelet, no routable address.
		"--endpoint-reconciler-type=none",
		"--profiling=false",
	}
	args = append(args, o.extraArgs...)
	cmd.SetArgs(args)
	cmd.SetOut(os.Stderr) // stdout is reserved for the KUBECONFIG= line
	cmd.SetErr(os.Stderr)

	var failed atomic.Bool
	stop := func(reason string) {
		failed.Store(true)
		logf("%s; shutting down", reason)
		_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
	}

	go func() {
		select {
		case err := <-etcd.Err():
			if ctx.Err() == nil {
				stop(fmt.Sprintf("etcd failed: %v", err))
			}
		case <-ctx.Done():
		}
	}()

	if o.exitOnStdinClose {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			if ctx.Err() == nil {
				logf("stdin closed; shutting down")
				_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
			}
		}()
	}

	start := time.Now()
	go func() {
		if err := waitReady(ctx, pki, st.APIServer, o.readyTimeout); err != nil {
			if ctx.Err() == nil {
				stop(err.Error())
			}
			return
		}
		logf("apiserver ready on https://%s:%d after %s", loopback, st.APIServer, time.Since(start).Round(time.Millisecond))
		if len(o.controllers) > 0 {
			// KUBECONFIG= is printed only once they run, so a test that
			// waits for it can rely on them.
			if err := startControllers(ctx, kubeconfig, o.controllers); err != nil {
				if ctx.Err() == nil {
					stop("controllers: " + err.Error())
				}
				return
			}
		}
		fmt.Fprintf(os.Stdout, "KUBECONFIG=%s\n", kubeconfig)
	}()

	// Blocks until the signal context is cancelled and the apiserver has
	// shut down gracefully, or until it fails to start.
	err = cmd.Execute()
	if err != nil {
		logf("kube-apiserver: %v", err)
		return 1
	}
	if failed.Load() {
		return 1
	}
	logf("kube-apiserver stopped")
	return 0
}

// ---------------------------------------------------------------- ports

type state struct {
	APIServer  int `json:"apiserver"`
	EtcdClient int `json:"etcdClient"`
	EtcdPeer   int `json:"etcdPeer"`
}

func loadState(path string) state {
	var st state
	b, err := os.ReadFile(path)
	if err == nil {
		_ = json.Unmarshal(b, &st)
	}
	return st
}

// pickPort returns preferred if it can be bound on loopback right now,
// otherwise a port the kernel hands out. Returns 0 on failure.
func pickPort(preferred int) int {
	if preferred > 0 {
		if l, err := net.Listen("tcp", net.JoinHostPort(loopback, strconv.Itoa(preferred))); err == nil {
			l.Close()
			return preferred
		}
	}
	l, err := net.Listen("tcp", net.JoinHostPort(loopback, "0"))
	if err != nil {
		return 0
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// dirLock stays open (and flock'ed) for the life of the process.
var dirLock *os.File

// lockDir fails at once if another testapiserver is using dir; without it
// the second one would clobber ports.json/kubeconfig and then hang on
// etcd's database lock.
func lockDir(dir string) error {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return fmt.Errorf("%s is in use by another testapiserver: %w", dir, err)
	}
	dirLock = f
	return nil
}

// ----------------------------------------------------------------- etcd

func startEtcd(ctx context.Context, o *options, st state) (*embed.Etcd, error) {
	mustURL := func(port int) url.URL {
		return url.URL{Scheme: "http", Host: net.JoinHostPort(loopback, strconv.Itoa(port))}
	}
	cfg := embed.NewConfig()
	cfg.Name = "testapiserver"
	cfg.Dir = filepath.Join(o.dir, "etcd")
	cfg.ListenClientUrls = []url.URL{mustURL(st.EtcdClient)}
	cfg.AdvertiseClientUrls = cfg.ListenClientUrls
	cfg.ListenPeerUrls = []url.URL{mustURL(st.EtcdPeer)}
	cfg.AdvertisePeerUrls = cfg.ListenPeerUrls
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.ListenMetricsUrls = nil
	cfg.LogLevel = "warn"
	cfg.UnsafeNoFsync = !o.etcdFsync

	// StartEtcd itself can block (e.g. on the database file lock), so run
	// it aside and let a signal or the timeout win; the process exits
	// right after a failure here, which also ends a stuck StartEtcd.
	type result struct {
		e   *embed.Etcd
		err error
	}
	started := make(chan result, 1)
	go func() {
		e, err := embed.StartEtcd(cfg)
		if err == nil {
			select {
			case <-e.Server.ReadyNotify():
			case err = <-e.Err():
				e.Close()
				e = nil
			}
		}
		started <- result{e, err}
	}()
	select {
	case r := <-started:
		if r.err != nil {
			return nil, r.err
		}
		logf("etcd ready on %s (data in %s)", cfg.ListenClientUrls[0].String(), cfg.Dir)
		return r.e, nil
	case <-ctx.Done():
		return nil, errors.New("interrupted while starting")
	case <-time.After(time.Minute):
		return nil, errors.New("not ready after 1m")
	}
}

// ------------------------------------------------------------ readiness

func waitReady(ctx context.Context, p *pkiFiles, port int, timeout time.Duration) error {
	tlsCfg, err := p.clientTLS()
	if err != nil {
		return err
	}
	client := &http.Client{
		Timeout:   3 * time.Second,
		Transport: &http.Transport{TLSClientConfig: tlsCfg, DisableKeepAlives: true},
	}
	u := fmt.Sprintf("https://%s/readyz", net.JoinHostPort(loopback, strconv.Itoa(port)))
	deadline := time.Now().Add(timeout)
	for {
		resp, err := client.Get(u)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("apiserver not ready after %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ----------------------------------------------------------------- kubeconfig

func writeKubeconfig(path string, p *pkiFiles, port int) error {
	read := func(f string) (string, error) {
		b, err := os.ReadFile(f)
		return base64.StdEncoding.EncodeToString(b), err
	}
	ca, err := read(p.caCert)
	if err != nil {
		return err
	}
	crt, err := read(p.adminCert)
	if err != nil {
		return err
	}
	key, err := read(p.adminKey)
	if err != nil {
		return err
	}
	content := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: testapiserver
  cluster:
    server: https://%s
    certificate-authority-data: %s
users:
- name: admin
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: testapiserver
  context:
    cluster: testapiserver
    user: admin
    namespace: default
current-context: testapiserver
preferences: {}
`, net.JoinHostPort(loopback, strconv.Itoa(port)), ca, crt, key)
	return writeAtomic(path, []byte(content), 0o600)
}

// ----------------------------------------------------------------- PKI

type pkiFiles struct {
	dir                   string
	caCert, caKey         string
	serverCert, serverKey string
	adminCert, adminKey   string
	saKey, saPub          string
}

func (p *pkiFiles) clientTLS() (*tls.Config, error) {
	caPEM, err := os.ReadFile(p.caCert)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("no CA certificate in " + p.caCert)
	}
	kp, err := tls.LoadX509KeyPair(p.adminCert, p.adminKey)
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{kp}, MinVersion: tls.VersionTLS12}, nil
}

func exists(paths ...string) bool {
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			return false
		}
	}
	return true
}

// ensurePKI keeps whatever complete pairs already exist in dir, so a
// restart on the same --dir keeps old kubeconfigs and tokens valid, and
// generates the missing ones.
func ensurePKI(dir string) (*pkiFiles, error) {
	p := &pkiFiles{
		dir:    dir,
		caCert: filepath.Join(dir, "ca.crt"), caKey: filepath.Join(dir, "ca.key"),
		serverCert: filepath.Join(dir, "apiserver.crt"), serverKey: filepath.Join(dir, "apiserver.key"),
		adminCert: filepath.Join(dir, "admin.crt"), adminKey: filepath.Join(dir, "admin.key"),
		saKey: filepath.Join(dir, "sa.key"), saPub: filepath.Join(dir, "sa.pub"),
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}

	var ca *x509.Certificate
	var caSigner crypto.Signer
	freshCA := false
	if exists(p.caCert, p.caKey) {
		var err error
		ca, caSigner, err = loadPair(p.caCert, p.caKey)
		if err != nil {
			return nil, fmt.Errorf("existing CA: %w", err)
		}
	} else {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		tmpl := &x509.Certificate{
			Subject:               pkix.Name{CommonName: "ferryman-testapiserver-ca"},
			NotBefore:             time.Now().Add(-time.Hour),
			NotAfter:              time.Now().AddDate(10, 0, 0),
			KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
			BasicConstraintsValid: true,
			IsCA:                  true,
		}
		ca, err = issue(tmpl, key, nil, nil)
		if err != nil {
			return nil, err
		}
		caSigner, freshCA = key, true
		if err := savePair(p.caCert, p.caKey, ca, key); err != nil {
			return nil, err
		}
	}

	if freshCA || !exists(p.serverCert, p.serverKey) {
		if err := issueLeaf(p.serverCert, p.serverKey, ca, caSigner, &x509.Certificate{
			Subject:     pkix.Name{CommonName: "kube-apiserver"},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			IPAddresses: []net.IP{net.ParseIP(loopback), net.ParseIP("10.96.0.1")},
			DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
				"kubernetes.default.svc.cluster.local"},
		}); err != nil {
			return nil, err
		}
	}
	if freshCA || !exists(p.adminCert, p.adminKey) {
		if err := issueLeaf(p.adminCert, p.adminKey, ca, caSigner, &x509.Certificate{
			Subject:     pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}); err != nil {
			return nil, err
		}
	}
	if !exists(p.saKey, p.saPub) {
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return nil, err
		}
		pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
		if err != nil {
			return nil, err
		}
		if err := writeAtomic(p.saKey, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
			return nil, err
		}
		if err := writeAtomic(p.saPub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func issueLeaf(certPath, keyPath string, ca *x509.Certificate, caKey crypto.Signer, tmpl *x509.Certificate) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().AddDate(10, 0, 0)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.BasicConstraintsValid = true
	cert, err := issue(tmpl, key, ca, caKey)
	if err != nil {
		return err
	}
	return savePair(certPath, keyPath, cert, key)
}

// issue signs tmpl for key's public half with parent/parentKey, or
// self-signs it when parent is nil.
func issue(tmpl *x509.Certificate, key crypto.Signer, parent *x509.Certificate, parentKey crypto.Signer) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(der)
}

func savePair(certPath, keyPath string, cert *x509.Certificate, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := writeAtomic(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return err
	}
	return writeAtomic(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), 0o644)
}

func loadPair(certPath, keyPath string) (*x509.Certificate, crypto.Signer, error) {
	kp, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(kp.Certificate[0])
	if err != nil {
		return nil, nil, err
	}
	signer, ok := kp.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, nil, errors.New("private key cannot sign")
	}
	return cert, signer, nil
}

// ----------------------------------------------------------------- files

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(path, append(b, '\n'), 0o644)
}

func writeAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// goproxy is the Go peer of the load runs (run.sh): the standard library's
// httputil.ReverseProxy as an mTLS front proxy, the shape of kube-aggregator's own proxy
// (k8s.io/kube-aggregator pkg/apiserver/handler_proxy.go, which forwards through
// k8s.io/apimachinery's UpgradeAwareHandler, itself built on httputil.ReverseProxy).
//
// Clients must present a certificate signed by -client-ca. The leaf's CommonName goes to
// the backend as X-Remote-User and each Organization as X-Remote-Group (copies sent by
// the client are dropped first), as HAProxy and nginx are configured in run.sh. Towards
// the backend it presents the front-proxy client certificate, verifies the backend's
// serving certificate against -backend-ca under -backend-name, and speaks HTTP/2 over
// kept-alive connections, as kube-apiserver's transport does.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to serve on")
	backend := flag.String("backend", "", "backend base URL, e.g. https://127.0.0.1:8443")
	cert := flag.String("cert", "", "serving certificate (PEM)")
	key := flag.String("key", "", "serving key (PEM)")
	clientCA := flag.String("client-ca", "", "CA bundle that signs client certificates (PEM)")
	proxyCert := flag.String("proxy-cert", "", "front-proxy client certificate (PEM)")
	proxyKey := flag.String("proxy-key", "", "front-proxy client key (PEM)")
	backendCA := flag.String("backend-ca", "", "CA bundle of the backend's serving certificate (PEM)")
	backendName := flag.String("backend-name", "", "name the backend's certificate must carry")
	flag.Parse()

	target, err := url.Parse(*backend)
	if err != nil || target.Host == "" {
		log.Fatalf("-backend %q: not a URL with a host", *backend)
	}
	clientCAs := pool(*clientCA)
	backendCAs := pool(*backendCA)
	front, err := tls.LoadX509KeyPair(*proxyCert, *proxyKey)
	if err != nil {
		log.Fatalf("front-proxy client certificate: %v", err)
	}
	transport := &http.Transport{
		TLSClientConfig: &tls.Config{
			Certificates: []tls.Certificate{front},
			RootCAs:      backendCAs,
			ServerName:   *backendName,
		},
		ForceAttemptHTTP2:   true,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
	}
	proxy := &httputil.ReverseProxy{
		Director: func(r *http.Request) {
			r.URL.Scheme = target.Scheme
			r.URL.Host = target.Host
			r.Header.Del("Authorization")
			r.Header.Del("X-Remote-User")
			r.Header.Del("X-Remote-Group")
			leaf := r.TLS.PeerCertificates[0]
			r.Header.Set("X-Remote-User", leaf.Subject.CommonName)
			for _, o := range leaf.Subject.Organization {
				r.Header.Add("X-Remote-Group", o)
			}
		},
		Transport: transport,
		ErrorLog:  log.New(os.Stderr, "goproxy: ", 0),
	}
	server := &http.Server{
		Handler: proxy,
		TLSConfig: &tls.Config{
			ClientAuth: tls.RequireAndVerifyClientCert,
			ClientCAs:  clientCAs,
		},
		ReadHeaderTimeout: 32 * time.Second,
		IdleTimeout:       90 * time.Second,
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatalf("listen on %s: %v", *listen, err)
	}
	log.Printf("serving on %s, proxying to %s", ln.Addr(), target)
	// ServeTLS offers HTTP/2 and HTTP/1.1 by ALPN.
	log.Fatal(server.ServeTLS(ln, *cert, *key))
}

// pool reads a PEM bundle of CA certificates; the run cannot go on without one.
func pool(path string) *x509.CertPool {
	pem, err := os.ReadFile(path)
	if err != nil {
		log.Fatalf("read %s: %v", path, err)
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pem) {
		log.Fatalf("%s: no PEM certificate", path)
	}
	return p
}

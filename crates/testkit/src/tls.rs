//! TLS in front of a plain local server: a private CA, its server certificate (and a
//! client certificate for mutual TLS), and a listener per upstream port that terminates
//! TLS and forwards the bytes.
/// TLS listeners in front of plain local `upstreams` ports (AMQP, the management API, a
/// schema registry), one each, their certificate issued by one private CA for `names` (the shape of
/// most production amqps listeners). The runtime that serves them lives as long as the
/// value.
pub struct TlsFront {
    pub ports: Vec<u16>,
    pub ca_pem: String,
    /// A client certificate and its key (PEM) from the same CA, for `mutual` fronts.
    pub client_pem: String,
    pub client_key_pem: String,
    _rt: tokio::runtime::Runtime,
}

impl TlsFront {
    /// The CA, client certificate and key written to `dir`, as an amqps:// URI's
    /// `cacertfile=…&certfile=…&keyfile=…`.
    pub fn files_in(&self, dir: &std::path::Path) -> String {
        let file = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).expect("write");
            path.display().to_string()
        };
        format!(
            "cacertfile={}&certfile={}&keyfile={}",
            file("ca.pem", &self.ca_pem),
            file("client.pem", &self.client_pem),
            file("client.key", &self.client_key_pem)
        )
    }
}

/// With `mutual`, the front also requires a client certificate from its CA.
pub fn tls_front(names: &[&str], upstreams: &[u16], mutual: bool) -> TlsFront {
    front(names, upstreams, mutual, false)
}

/// A TLS front for a plain PostgreSQL server at `upstream`: it answers the client's
/// SSLRequest with `S`, then speaks TLS as a server with `sslmode` on would (the server
/// behind it sees the startup message in the clear).
pub fn postgres_tls_front(names: &[&str], upstream: u16) -> TlsFront {
    front(names, &[upstream], false, true)
}

fn front(names: &[&str], upstreams: &[u16], mutual: bool, postgres: bool) -> TlsFront {
    use tokio_rustls::rustls;
    let ca_key = rcgen::KeyPair::generate().expect("CA key");
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "dlq-triage test CA");
    ca_params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::CrlSign,
    ];
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).expect("CA");
    let leaf_key = rcgen::KeyPair::generate().expect("leaf key");
    let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    let leaf = rcgen::CertificateParams::new(names)
        .expect("leaf params")
        .signed_by(&leaf_key, &ca)
        .expect("leaf");
    let client_key = rcgen::KeyPair::generate().expect("client key");
    let mut client_params =
        rcgen::CertificateParams::new(vec!["dlq-triage-client".to_string()]).expect("params");
    client_params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let client = client_params
        .signed_by(&client_key, &ca)
        .expect("client certificate");
    let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("TLS versions");
    let builder = if mutual {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca.der().clone()).expect("CA root");
        let verifier =
            rustls::server::WebPkiClientVerifier::builder_with_provider(roots.into(), provider)
                .build()
                .expect("client verifier");
        builder.with_client_cert_verifier(verifier)
    } else {
        builder.with_no_client_auth()
    };
    let config = builder
        .with_single_cert(
            vec![leaf.der().clone()],
            rustls::pki_types::PrivatePkcs8KeyDer::from(leaf_key.serialize_der()).into(),
        )
        .expect("server config");
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let mut ports = Vec::new();
    for &upstream in upstreams {
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("listener");
        ports.push(listener.local_addr().expect("addr").port());
        let acceptor = acceptor.clone();
        rt.spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let mut inbound = inbound;
                    if postgres {
                        use tokio::io::{AsyncReadExt, AsyncWriteExt};
                        // SSLRequest: length 8, code 80877103.
                        let mut request = [0u8; 8];
                        if inbound.read_exact(&mut request).await.is_err()
                            || request != [0, 0, 0, 8, 4, 210, 22, 47]
                            || inbound.write_all(b"S").await.is_err()
                        {
                            return;
                        }
                    }
                    // A client that refuses the certificate ends the handshake here.
                    let Ok(mut tls) = acceptor.accept(inbound).await else {
                        return;
                    };
                    let Ok(mut plain) =
                        tokio::net::TcpStream::connect(("127.0.0.1", upstream)).await
                    else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                });
            }
        });
    }
    TlsFront {
        ports,
        ca_pem: ca.pem(),
        client_pem: client.pem(),
        client_key_pem: client_key.serialize_pem(),
        _rt: rt,
    }
}

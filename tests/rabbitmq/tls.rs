//! amqps: a private CA, client certificates, a replay over mutual TLS.

use crate::prelude::*;
use dlq_testkit::tls::tls_front;

/// amqps end to end on the binary: a listener whose certificate comes from a private CA
/// is browsed whole once SSL_CERT_FILE names that CA, and left as it was; without it, or
/// under a name the certificate does not carry, or on the plain port, the refusal says
/// what to do, and never shows the password.
#[test]
fn amqps_with_a_private_ca_is_browsed_and_refusals_say_why() {
    if !rabbit_available() {
        return;
    }
    let t = seeded("tls");
    let dlq = t.n("dlq");
    // AMQP and the management API behind one private CA: one SSL_CERT_FILE serves both.
    let front = tls_front(&["localhost"], &[5672, 15672], false);
    let (amqps, https) = (front.ports[0], front.ports[1]);
    let dir = tempfile::tempdir().expect("tmp");
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &front.ca_pem).expect("CA file");
    let summary = |host: &str, port: u16, ca: Option<&std::path::Path>| {
        let mut c = cli_command(
            dir.path(),
            &[
                "summary",
                &format!("amqps://guest:guest@{host}:{port}/%2f?queue={dlq}"),
                "--json",
                "--queue-type",
                "classic",
            ],
        );
        c.env_remove("SSL_CERT_FILE").env_remove("SSL_CERT_DIR");
        if let Some(ca) = ca {
            c.env("SSL_CERT_FILE", ca);
        }
        c.output().expect("binary runs")
    };

    let out = summary("localhost", amqps, Some(&ca));
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{stderr}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(doc["total"], 10, "{stderr}");
    assert_eq!(doc["coverage"]["complete"], true, "{stderr}");
    t.wait_for(&dlq, 10);

    let refused = |out: std::process::Output| {
        assert!(!out.status.success(), "connected where it must not");
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(!err.contains("guest:guest"), "password shown: {err}");
        err
    };
    let err = refused(summary("localhost", amqps, None));
    assert!(
        err.contains("UnknownIssuer") && err.contains("SSL_CERT_FILE"),
        "an untrusted CA names the fix: {err}"
    );
    let err = refused(summary("127.0.0.1", amqps, Some(&ca)));
    assert!(
        err.contains("does not name `127.0.0.1`"),
        "a name the certificate lacks is said: {err}"
    );
    let err = refused(summary("127.0.0.1", 5672, Some(&ca)));
    assert!(
        err.contains("did not answer in TLS"),
        "amqps to the plain port is said: {err}"
    );
    assert_eq!(t.count(&dlq), 10, "no letter consumed");

    if !management_available() {
        return;
    }
    let queues = |ca: Option<&std::path::Path>| {
        let mut c = cli_command(
            dir.path(),
            &[
                "queues",
                &format!("amqps://guest:guest@localhost:{amqps}/%2f"),
                "--management-url",
                &format!("https://localhost:{https}"),
                "--json",
            ],
        );
        c.env_remove("SSL_CERT_FILE").env_remove("SSL_CERT_DIR");
        if let Some(ca) = ca {
            c.env("SSL_CERT_FILE", ca);
        }
        c.output().expect("binary runs")
    };
    let out = queues(Some(&ca));
    exited(&out, 0);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let listed = doc["queues"]
        .as_array()
        .and_then(|qs| qs.iter().find(|q| q["name"] == dlq.as_str()).cloned());
    assert_eq!(
        listed.map(|q| q["looks_like_dlq"].clone()),
        Some(serde_json::json!(true)),
        "{doc}"
    );
    let err = refused(queues(None));
    assert!(
        err.contains("certificate") && err.contains("SSL_CERT_FILE"),
        "{err}"
    );
}

/// A broker that requires a client certificate (mutual TLS), behind a private CA named by
/// the URI alone (`cacertfile`, no SSL_CERT_FILE): browsed whole with `certfile` and
/// `keyfile`, its management API listed with the same files; without the certificate, or
/// with a key file that is not there, the refusal says what to add.
#[test]
fn amqps_with_a_client_certificate_from_the_uri() {
    if !rabbit_available() {
        return;
    }
    let t = seeded("mtls");
    let dlq = t.n("dlq");
    let front = tls_front(&["localhost"], &[5672, 15672], true);
    let (amqps, https) = (front.ports[0], front.ports[1]);
    let dir = tempfile::tempdir().expect("tmp");
    let files = front.files_in(dir.path());
    let path = |name: &str| dir.path().join(name).display().to_string();
    let (ca, cert) = (path("ca.pem"), path("client.pem"));
    let run = |args: &[&str]| {
        let mut c = cli_command(dir.path(), args);
        c.env_remove("SSL_CERT_FILE").env_remove("SSL_CERT_DIR");
        c.output().expect("binary runs")
    };
    let base = format!("amqps://guest:guest@localhost:{amqps}/%2f");
    let summary = |query: &str| {
        run(&[
            "summary",
            &format!("{base}?queue={dlq}{query}"),
            "--json",
            "--queue-type",
            "classic",
        ])
    };

    let out = summary(&format!("&{files}"));
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{stderr}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(doc["total"], 10, "{stderr}");
    t.wait_for(&dlq, 10);

    let out = summary(&format!("&cacertfile={ca}"));
    assert!(
        !out.status.success(),
        "connected without a client certificate"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("&certfile="), "{err}");
    let out = summary(&format!(
        "&cacertfile={ca}&certfile={cert}&keyfile=/nonexistent/client.key"
    ));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("keyfile=/nonexistent/client.key"),
        "the missing file is named: {err}"
    );
    // A CA file with no certificate in it is said as such, not as an untrusted server.
    let out = summary(&format!("&cacertfile={cert}x"));
    assert!(!out.status.success());
    std::fs::write(format!("{cert}x"), b"\x00\x01 not PEM").expect("junk");
    let out = summary(&format!("&cacertfile={cert}x"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("is not a PEM certificate"),
        "{err}"
    );
    // The same key in SEC1 form (`BEGIN EC PRIVATE KEY`): rustls takes it for AMQP, so a
    // browse that does not call the management API works; the API's client needs
    // PKCS#8, which is said when it is called.
    let sec1 = dir.path().join("client-sec1.key");
    let key = openssl::pkey::PKey::private_key_from_pem(front.client_key_pem.as_bytes())
        .expect("key")
        .ec_key()
        .expect("EC key")
        .private_key_to_pem()
        .expect("SEC1 PEM");
    std::fs::write(&sec1, key).expect("write");
    let sec1_files = format!("cacertfile={ca}&certfile={cert}&keyfile={}", sec1.display());
    let out = summary(&format!("&{sec1_files}"));
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "a SEC1 key over AMQP: {stderr}");
    t.wait_for(&dlq, 10);
    assert_eq!(t.count(&dlq), 10, "no letter consumed");

    if !management_available() {
        return;
    }
    let out = run(&[
        "queues",
        &format!("{base}?{sec1_files}"),
        "--management-url",
        &format!("https://localhost:{https}"),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("PKCS#8"), "{err}");
    let out = run(&[
        "queues",
        &format!("{base}?{files}"),
        "--management-url",
        &format!("https://localhost:{https}"),
        "--json",
    ]);
    exited(&out, 0);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert!(
        doc["queues"]
            .as_array()
            .is_some_and(|qs| qs.iter().any(|q| q["name"] == dlq.as_str())),
        "{doc}"
    );
}

/// A replay over mutual TLS: the publisher and the acks of the DLQ copies go through the
/// same certificate files as the browse (the publisher opens its own connection).
#[test]
fn a_replay_over_mutual_tls_publishes_and_acks() {
    if !rabbit_available() {
        return;
    }
    let t = dead_orders("replay-tls");
    let front = tls_front(&["localhost"], &[5672], true);
    let dir = tempfile::tempdir().expect("tmp");
    let uri = format!(
        "amqps://guest:guest@localhost:{}/%2f?queue={}&{}",
        front.ports[0],
        t.n("dlq"),
        front.files_in(dir.path())
    );
    let (report, seen) = replay_rejected(&t, dir.path(), &uri);
    assert_eq!(report["outcome"]["confirmed"], 20, "{report}");
    assert_eq!(seen.len(), 20, "the service got each order once");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        t.count(&t.n("dlq")),
        2,
        "the 20 originals acked after their confirms; the 2 bad ones back"
    );
    verified(dir.path());
}

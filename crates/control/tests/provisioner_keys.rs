//! Provisioner keys (`provisioner_keys.rs`): owners make, list and delete
//! them; the secret is returned once, kept only as its hash, and stands for
//! its key until the key is deleted; the audit log records the key's name
//! and tags, never the secret. A real (SQLite) store; no Terraform runs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use abode_control::{AuditQuery, Caller, Config, Control, ControlError};
use abode_store::*;

struct Setup {
    _dir: tempfile::TempDir,
    store: Store,
    control: Control,
    owner: Caller,
    member: Caller,
}

async fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_sqlite(&dir.path().join("abode.db"))
        .await
        .unwrap();
    let config = Config::new(dir.path().join("data"), "http://127.0.0.1:1".into());
    let control = Control::new(store.clone(), config);
    let user = |name: &str, roles: Roles| NewUser {
        username: name.into(),
        email: format!("{name}@example.com"),
        roles,
        password_hash: "x".into(),
    };
    let owner_roles = Roles::from([Role::Owner, Role::Member]);
    let alice = store
        .create_first_user(&user("alice", owner_roles.clone()))
        .await
        .unwrap();
    let mem = store
        .create_user(&user("mem", Roles::from([Role::Member])))
        .await
        .unwrap();
    let as_caller = |user: User, roles: Roles| Caller {
        user,
        roles,
        request_id: None,
        token_name: None,
        scope: abode_control::authz::TokenScope::all(),
    };
    Setup {
        _dir: dir,
        store,
        control,
        owner: as_caller(alice, owner_roles),
        member: as_caller(mem, Roles::from([Role::Member])),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_stands_for_itself_until_deleted_and_only_owners_manage_keys() {
    let Setup {
        _dir,
        store,
        control,
        owner,
        member,
    } = setup().await;
    let tags = ["zone=b".to_string(), "cloud=aws".to_string()];
    let (key, secret) = control
        .provisioner_keys()
        .create(&owner, "west", &tags)
        .await
        .unwrap();
    assert!(secret.starts_with("abode_pk_"), "{secret}");
    assert_eq!(key.name, "west");
    assert_eq!(key.tags, ["cloud=aws", "zone=b"]);
    assert_eq!(key.created_by, "alice");

    // The secret finds its key; its hash is what is stored, not the secret.
    assert_eq!(
        control
            .provisioner_keys()
            .for_secret(&secret)
            .await
            .unwrap(),
        key
    );
    let row = store
        .provisioner_key_by_hash(&abode_control::token_hash(&secret))
        .await
        .unwrap();
    assert_eq!(row.id, key.id);
    let unknown = [String::new(), "abode_pk_0".into(), format!("{secret}x")];
    for wrong in unknown {
        assert!(matches!(
            control.provisioner_keys().for_secret(&wrong).await,
            Err(ControlError::Unauthorized(_))
        ));
    }

    // Refusals, each one line: (who, name, tags, expected error).
    type Refusal<'a> = (
        &'a Caller,
        &'a str,
        &'a [&'a str],
        fn(&ControlError) -> bool,
    );
    let refusals: [Refusal; 5] = [
        (&member, "other", &[], |e| {
            matches!(e, ControlError::Forbidden(_))
        }),
        (&owner, "west", &[], |e| {
            matches!(e, ControlError::Conflict(_))
        }),
        (&owner, "Bad Name", &[], |e| {
            matches!(e, ControlError::BadRequest(_))
        }),
        (&owner, "other", &["cloud"], |e| {
            matches!(e, ControlError::BadRequest(_))
        }),
        (&owner, "other", &["a=1", "a=2"], |e| {
            matches!(e, ControlError::BadRequest(_))
        }),
    ];
    for (caller, name, tags, expected) in refusals {
        let tags: Vec<String> = tags.iter().map(|tag| tag.to_string()).collect();
        let error = control
            .provisioner_keys()
            .create(caller, name, &tags)
            .await
            .unwrap_err();
        assert!(expected(&error), "{name} {tags:?}: {error:?}");
        assert!(!error.to_string().contains('\n'), "{error}");
    }
    assert!(matches!(
        control.provisioner_keys().list(&member, None, None).await,
        Err(ControlError::Forbidden(_))
    ));
    assert!(matches!(
        control.provisioner_keys().delete(&member, "west").await,
        Err(ControlError::Forbidden(_))
    ));

    let listed = control
        .provisioner_keys()
        .list(&owner, None, None)
        .await
        .unwrap();
    assert_eq!(listed.items, std::slice::from_ref(&key));

    // Deleted: the secret no longer authenticates, a second delete is 404.
    assert_eq!(
        control
            .provisioner_keys()
            .delete(&owner, "west")
            .await
            .unwrap(),
        key
    );
    assert!(matches!(
        control.provisioner_keys().for_secret(&secret).await,
        Err(ControlError::Unauthorized(_))
    ));
    assert!(matches!(
        control.provisioner_keys().delete(&owner, "west").await,
        Err(ControlError::NotFound(_))
    ));

    // Audited, without the secret.
    let events = control
        .audit_log()
        .events(&owner, &AuditQuery::default())
        .await
        .unwrap()
        .items;
    let ours: Vec<(&str, &str, Option<&str>)> = events
        .iter()
        .filter(|event| event.action.starts_with("provisioner_key."))
        .map(|event| {
            (
                event.action.as_str(),
                event.target.as_str(),
                event.details.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        ours,
        [
            ("provisioner_key.delete", "west", None),
            (
                "provisioner_key.create",
                "west",
                Some("tags=cloud=aws,zone=b")
            ),
        ]
    );
    let everything = format!("{events:?}");
    assert!(!everything.contains(&secret));
}

//! Users' roles in the store: a set read and changed in one transaction, the
//! last owner kept even against concurrent changes, unknown stored names
//! refused by name, and databases from before `user_roles` upgraded. Every
//! behaviour runs on SQLite (a temporary file) and on PostgreSQL (a fresh
//! schema of the database at ABODE_TEST_POSTGRES_URL).
use abode_store::*;

use crate::common::{migrations_before, on_every_backend, postgres_schema_url, sqlite_pool};

/// A user without roles (the store gives none; the domain does).
fn new_user(name: &str) -> NewUser {
    NewUser {
        username: name.into(),
        email: format!("{name}@example.com"),
        roles: Roles::new(),
        password_hash: "x".into(),
    }
}

fn roles(list: &[Role]) -> Roles {
    list.iter().copied().collect()
}

/// A user whose roles are exactly `list`.
async fn user_with(store: &Store, name: &str, list: &[Role]) -> User {
    let user = store.create_user(&new_user(name)).await.unwrap();
    store
        .set_roles(&user.id, &roles(list))
        .await
        .unwrap()
        .unwrap();
    user
}

/// A role change: (add, remove, roles after, `users.role` after).
type Step = (
    &'static [Role],
    &'static [Role],
    &'static [Role],
    &'static str,
);

async fn roles_are_a_set_read_and_changed(store: Store) {
    let alice = store.create_first_user(&new_user("alice")).await.unwrap();
    assert_eq!(store.roles_of(&alice.id).await.unwrap(), Roles::new());

    let change = store
        .set_roles(&alice.id, &roles(&[Role::Owner, Role::Member]))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(change.before, Roles::new());
    assert_eq!(change.after, roles(&[Role::Owner, Role::Member]));
    assert_eq!(
        store.roles_of(&alice.id).await.unwrap(),
        roles(&[Role::Member, Role::Owner])
    );

    let bob = user_with(&store, "bob", &[Role::Member]).await;
    let steps: [Step; 5] = [
        (
            &[Role::Auditor],
            &[],
            &[Role::Auditor, Role::Member],
            "member",
        ),
        (
            &[Role::TemplateAdmin],
            &[Role::Auditor],
            &[Role::TemplateAdmin, Role::Member],
            "template-admin",
        ),
        // Adding what is held and removing what is not change nothing.
        (
            &[Role::Member],
            &[Role::UserAdmin],
            &[Role::TemplateAdmin, Role::Member],
            "template-admin",
        ),
        // Named on both sides: adding wins.
        (
            &[Role::UserAdmin],
            &[Role::UserAdmin, Role::TemplateAdmin],
            &[Role::UserAdmin, Role::Member],
            "member",
        ),
        (
            &[Role::Owner],
            &[],
            &[Role::Owner, Role::UserAdmin, Role::Member],
            "owner",
        ),
    ];
    for (add, remove, expected, legacy) in steps {
        let before = store.roles_of(&bob.id).await.unwrap();
        let change = store
            .change_roles(&bob.id, &roles(add), &roles(remove))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(change.before, before);
        assert_eq!(change.after, roles(expected), "+{add:?} -{remove:?}");
        assert_eq!(store.roles_of(&bob.id).await.unwrap(), roles(expected));
        // The first schema's column keeps the nearest old name.
        assert_eq!(store.user_by_id(&bob.id).await.unwrap().role, legacy);
    }

    // Nobody holds no role; the refused change writes nothing.
    let held = store.roles_of(&bob.id).await.unwrap();
    let refused = store
        .change_roles(&bob.id, &Roles::new(), &held)
        .await
        .unwrap();
    // bob is one of two owners, so only the empty set is wrong here.
    assert_eq!(refused, Err(RoleRefusal::NoRoles));
    assert_eq!(store.roles_of(&bob.id).await.unwrap(), held);

    // An unknown user is NotFound, whatever the change.
    for answer in [
        store.set_roles("nobody", &roles(&[Role::Member])).await,
        store
            .change_roles("nobody", &roles(&[Role::Member]), &Roles::new())
            .await,
    ] {
        assert!(
            matches!(answer, Err(StoreError::NotFound("user"))),
            "{answer:?}"
        );
    }
    assert_eq!(store.roles_of("nobody").await.unwrap(), Roles::new());
}

async fn the_last_owner_keeps_the_owner_role(store: Store) {
    let alice = user_with(&store, "alice", &[Role::Owner]).await;
    let bob = user_with(&store, "bob", &[Role::Owner, Role::Member]).await;
    let owner = roles(&[Role::Owner]);

    // Two owners: one may go.
    store
        .change_roles(&bob.id, &Roles::new(), &owner)
        .await
        .unwrap()
        .unwrap();
    // Now alice is the last one, by either way of asking.
    for refused in [
        store
            .change_roles(&alice.id, &roles(&[Role::Member]), &owner)
            .await
            .unwrap(),
        store
            .set_roles(&alice.id, &roles(&[Role::Member]))
            .await
            .unwrap(),
    ] {
        assert_eq!(refused, Err(RoleRefusal::LastOwner));
    }
    assert_eq!(store.roles_of(&alice.id).await.unwrap(), owner);
    assert_eq!(store.user_by_id(&alice.id).await.unwrap().role, "owner");
    // Keeping owner while changing the rest is fine.
    store
        .change_roles(&alice.id, &roles(&[Role::Auditor]), &Roles::new())
        .await
        .unwrap()
        .unwrap();
    // With a second owner again, alice may step down.
    store
        .change_roles(&bob.id, &owner, &Roles::new())
        .await
        .unwrap()
        .unwrap();
    store
        .set_roles(&alice.id, &roles(&[Role::Member]))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(store.user_by_id(&alice.id).await.unwrap().role, "member");
}

/// Two owners removing each other's owner role at the same moment: exactly
/// one change goes through, and one owner is left.
async fn concurrent_owners_removing_each_other_leave_one(store: Store) {
    let owner = roles(&[Role::Owner]);
    let mut earlier: Vec<String> = Vec::new();
    for round in 0..8 {
        let alice = user_with(&store, &format!("alice{round}"), &[Role::Owner]).await;
        let bob = user_with(&store, &format!("bob{round}"), &[Role::Owner]).await;
        // Only this round's two users are owners.
        for id in &earlier {
            store
                .set_roles(id, &roles(&[Role::Member]))
                .await
                .unwrap()
                .unwrap();
        }
        let tasks = [alice.id.clone(), bob.id.clone()].map(|id| {
            let store = store.clone();
            let owner = owner.clone();
            tokio::spawn(async move {
                store
                    .change_roles(&id, &roles(&[Role::Member]), &owner)
                    .await
                    .unwrap()
            })
        });
        let mut answers = Vec::new();
        for task in tasks {
            answers.push(task.await.unwrap());
        }
        assert_eq!(
            answers.iter().filter(|answer| answer.is_ok()).count(),
            1,
            "round {round}: {answers:?}"
        );
        assert!(answers.contains(&Err(RoleRefusal::LastOwner)));
        let mut owners = 0;
        for id in [&alice.id, &bob.id] {
            if store.roles_of(id).await.unwrap().contains(Role::Owner) {
                owners += 1;
            }
        }
        assert_eq!(owners, 1, "round {round}");
        earlier.extend([alice.id, bob.id]);
    }
}

/// A new user's roles are written with the user (and `users.role` keeps the
/// nearest old name); a taken name is refused as before.
async fn users_are_created_with_their_roles(store: Store) {
    // (roles, `users.role`)
    let cases: [(&[Role], &str); 3] = [
        (&[Role::Owner, Role::Member], "owner"),
        (&[Role::Auditor], "member"),
        (&[Role::TemplateAdmin, Role::UserAdmin], "template-admin"),
    ];
    for (index, (list, legacy)) in cases.into_iter().enumerate() {
        let user = NewUser {
            roles: roles(list),
            ..new_user(&format!("user{index}"))
        };
        let created = if index == 0 {
            store.create_first_user(&user).await.unwrap()
        } else {
            store.create_user(&user).await.unwrap()
        };
        assert_eq!(store.roles_of(&created.id).await.unwrap(), roles(list));
        assert_eq!(created.role, legacy);
    }
    let taken = NewUser {
        roles: roles(&[Role::Owner]),
        ..new_user("user1")
    };
    assert!(matches!(
        store.create_user(&taken).await,
        Err(StoreError::Conflict(_))
    ));
    let users = store
        .list_user_page(None, 100, false)
        .await
        .unwrap()
        .items
        .len();
    assert_eq!(users, 3);
}

on_every_backend!(
    roles_are_a_set_read_and_changed,
    the_last_owner_keeps_the_owner_role,
    concurrent_owners_removing_each_other_leave_one,
    users_are_created_with_their_roles,
);

// ---- what is already in the database ----

/// Users as the schema before `user_roles` had them, one per old role.
const OLD_USERS: [&str; 3] = [
    "INSERT INTO users (id, username, email, role, password_hash, created_at) \
     VALUES ('u1', 'olivia', 'o@example.com', 'owner', 'x', 1000)",
    "INSERT INTO users (id, username, email, role, password_hash, created_at) \
     VALUES ('u2', 'tom', 't@example.com', 'template-admin', 'x', 1000)",
    "INSERT INTO users (id, username, email, role, password_hash, created_at) \
     VALUES ('u3', 'mia', 'm@example.com', 'member', 'x', 1000)",
];

/// Each old role keeps its meaning, and everyone keeps their own workspaces.
async fn old_users_have_their_roles(store: &Store) {
    let expected = [
        ("u1", roles(&[Role::Owner, Role::Member])),
        ("u2", roles(&[Role::TemplateAdmin, Role::Member])),
        ("u3", roles(&[Role::Member])),
    ];
    for (id, held) in expected {
        assert_eq!(store.roles_of(id).await.unwrap(), held, "{id}");
    }
    // And the rules hold from the first change on: olivia is the only owner.
    assert_eq!(
        store
            .set_roles("u1", &roles(&[Role::Member]))
            .await
            .unwrap(),
        Err(RoleRefusal::LastOwner)
    );
}

#[tokio::test]
async fn an_existing_sqlite_database_gets_its_users_roles() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("abode.db");
    let pool = sqlite_pool(&path).await;
    migrations_before("sqlite", 6)
        .await
        .run(&pool)
        .await
        .unwrap();
    for statement in OLD_USERS {
        sqlx::query(statement).execute(&pool).await.unwrap();
    }
    pool.close().await;
    let store = Store::open_sqlite(&path).await.unwrap();
    old_users_have_their_roles(&store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_existing_postgres_database_gets_its_users_roles() {
    let url = postgres_schema_url().await;
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    migrations_before("postgres", 5)
        .await
        .run(&pool)
        .await
        .unwrap();
    for statement in OLD_USERS {
        sqlx::query(statement).execute(&pool).await.unwrap();
    }
    pool.close().await;
    let store = Store::open_postgres(&url).await.unwrap();
    old_users_have_their_roles(&store).await;
}

/// A stored name no Role knows (written by a newer server, or by hand).
const UNKNOWN_ROLE: &str = "INSERT INTO user_roles (user_id, role) VALUES ('u3', 'superuser')";

async fn an_unknown_role_is_refused_by_name(store: &Store) {
    for error in [
        store.roles_of("u3").await.unwrap_err(),
        store
            .change_roles("u3", &roles(&[Role::Auditor]), &Roles::new())
            .await
            .unwrap_err(),
    ] {
        let error = error.to_string();
        assert!(error.contains("`superuser`"), "{error}");
    }
}

#[tokio::test]
async fn an_unknown_sqlite_role_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("abode.db");
    let store = Store::open_sqlite(&path).await.unwrap();
    let pool = sqlite_pool(&path).await;
    for statement in OLD_USERS.iter().chain([&UNKNOWN_ROLE]) {
        sqlx::query(statement).execute(&pool).await.unwrap();
    }
    an_unknown_role_is_refused_by_name(&store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_unknown_postgres_role_is_refused_by_name() {
    let url = postgres_schema_url().await;
    let store = Store::open_postgres(&url).await.unwrap();
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    for statement in OLD_USERS.iter().chain([&UNKNOWN_ROLE]) {
        sqlx::query(statement).execute(&pool).await.unwrap();
    }
    an_unknown_role_is_refused_by_name(&store).await;
}

//! Quotas: which build's cost counts for a workspace, a budget as the sum
//! of the owner's groups' allowances (`Everyone` included), and the
//! reservation that lets only one of two racing builds take the last of a
//! budget.

use abode_store::*;

use crate::common::*;

async fn group_with(store: &Store, name: &str, allowance: i64, member: &User) {
    let group = store
        .create_group(&NewGroup {
            name: name.into(),
            display_name: String::new(),
            source: GroupSource::Manual,
            quota_allowance: allowance,
        })
        .await
        .unwrap();
    store
        .change_group_members(&group.id, std::slice::from_ref(&member.id), &[])
        .await
        .unwrap();
}

async fn another_workspace(store: &Store, like: &Workspace, user: &User, name: &str) -> Build {
    let id = new_id();
    let (_, build) = store
        .create_workspace(
            &NewWorkspace {
                id: id.clone(),
                owner_id: user.id.clone(),
                name: name.into(),
                template_id: like.template_id.clone(),
                template_version_id: like.template_version_id.clone(),
                parameters: Parameters::new(),
                preset_name: None,
            },
            &NewBuild {
                id: new_id(),
                workspace_id: id,
                transition: Transition::Start,
                template_version_id: like.template_version_id.clone(),
                initiator_id: user.id.clone(),
                reason: BuildReason::Initiator,
                parameters: None,
                workspace_parameters: None,
                retention: None,
                rename_to: None,
                then_start: false,
            },
        )
        .await
        .unwrap();
    build
}

/// Claims every queued job for `holder`.
async fn claim_all(store: &Store, holder: &str) {
    while store
        .claim_job("w", holder, 60_000)
        .await
        .unwrap()
        .is_some()
    {}
}

async fn a_budget_adds_groups_and_counts_the_newest_costed_build(store: Store) {
    let (user, workspace, first) = seeded(&store).await;
    group_with(&store, "payers", 7, &user).await;
    group_with(&store, "more", 3, &user).await;
    claim_all(&store, "server").await;
    assert_eq!(
        store
            .reserve_build_cost(&first.id, "server", 5, true)
            .await
            .unwrap(),
        Reservation::Reserved
    );
    let usage = store.quota_usage(&user.id).await.unwrap();
    let allowances: Vec<(String, i64)> = usage
        .allowances
        .iter()
        .map(|g| (g.group.clone(), g.allowance))
        .collect();
    assert_eq!(
        allowances,
        [
            ("Everyone".to_string(), 0),
            ("more".to_string(), 3),
            ("payers".to_string(), 7)
        ]
    );
    assert_eq!(usage.budget(), 10);
    assert_eq!(usage.spent(), 5);
    assert!(usage.workspaces[0].reserved, "pending: reserved");

    // Once it succeeded, it is what the workspace costs; a stop that
    // failed does not change that, a canceled one neither.
    store
        .finish_build(&first.id, BuildStatus::Succeeded, None)
        .await
        .unwrap();
    let stop = store
        .create_build(&next_build(&workspace, &user, "stop"))
        .await
        .unwrap();
    claim_all(&store, "server").await;
    store
        .reserve_build_cost(&stop.id, "server", 1, false)
        .await
        .unwrap();
    store
        .finish_build(&stop.id, BuildStatus::Failed, Some("no"))
        .await
        .unwrap();
    let usage = store.quota_usage(&user.id).await.unwrap();
    assert_eq!((usage.spent(), usage.workspaces[0].reserved), (5, false));

    // A holder that lost the job reserves nothing.
    let again = store
        .create_build(&next_build(&workspace, &user, "stop"))
        .await
        .unwrap();
    claim_all(&store, "server").await;
    assert_eq!(
        store
            .reserve_build_cost(&again.id, "another", 1, false)
            .await
            .unwrap(),
        Reservation::NotHolder
    );
    assert_eq!(store.build_by_id(&again.id).await.unwrap().daily_cost, None);
}

async fn two_racing_builds_cannot_both_take_the_last_of_a_budget(store: Store) {
    let (user, workspace, first) = seeded(&store).await;
    group_with(&store, "payers", 10, &user).await;
    store
        .finish_build(&first.id, BuildStatus::Canceled, None)
        .await
        .unwrap();
    for round in 0..20 {
        // Each fits alone (6 of 10), not together.
        let a = another_workspace(&store, &workspace, &user, &format!("a{round}")).await;
        let b = another_workspace(&store, &workspace, &user, &format!("b{round}")).await;
        claim_all(&store, "server").await;
        let (left, right) = tokio::join!(
            {
                let store = store.clone();
                let id = a.id.clone();
                tokio::spawn(async move { store.reserve_build_cost(&id, "server", 6, true).await })
            },
            {
                let store = store.clone();
                let id = b.id.clone();
                tokio::spawn(async move { store.reserve_build_cost(&id, "server", 6, true).await })
            }
        );
        let outcomes = [left.unwrap().unwrap(), right.unwrap().unwrap()];
        let reserved = outcomes
            .iter()
            .filter(|o| **o == Reservation::Reserved)
            .count();
        let refused: Vec<&Reservation> = outcomes
            .iter()
            .filter(|o| matches!(o, Reservation::OverBudget { .. }))
            .collect();
        assert_eq!(
            (reserved, refused.len()),
            (1, 1),
            "round {round}: {outcomes:?}"
        );
        let Reservation::OverBudget { usage, cost } = refused[0] else {
            unreachable!()
        };
        // The refused one saw the other's reservation.
        assert_eq!((usage.spent(), usage.budget(), *cost), (6, 10, 6));
        let (winner, loser) = if outcomes[0] == Reservation::Reserved {
            (&a, &b)
        } else {
            (&b, &a)
        };
        let loser = store.build_by_id(&loser.id).await.unwrap();
        assert_eq!(
            (loser.daily_cost, loser.refusal.as_deref()),
            (None, Some("quota"))
        );
        assert_eq!(
            store.build_by_id(&winner.id).await.unwrap().daily_cost,
            Some(6)
        );
        // Both end, so that the next round starts from nothing spent.
        for build in [&a, &b] {
            store
                .finish_build(&build.id, BuildStatus::Failed, Some("round over"))
                .await
                .unwrap();
        }
        assert_eq!(store.quota_usage(&user.id).await.unwrap().spent(), 0);
    }
}

on_every_backend!(
    a_budget_adds_groups_and_counts_the_newest_costed_build,
    two_racing_builds_cannot_both_take_the_last_of_a_budget,
);

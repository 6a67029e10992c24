use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;

use super::*;

fn flights() -> Flights<&'static str, &'static str> {
    Flights::new()
}

async fn read_all<H>(reader: Reader<H>) -> Result<Vec<u8>, BoxError> {
    Ok(reader.collect().await?.to_bytes().to_vec())
}

#[tokio::test]
async fn one_leader_many_followers_and_every_one_reads_the_whole_body() {
    let flights = flights();
    let Join::Leader(leader) = flights.join("k") else {
        panic!("the first request leads")
    };
    let followers: Vec<_> = (0..100)
        .map(|_| match flights.join("k") {
            Join::Follower(f) => f,
            Join::Leader(_) => panic!("a second leader"),
        })
        .collect();
    let waits: Vec<_> = followers
        .into_iter()
        .map(|f| {
            tokio::spawn(async move {
                match f.wait(Duration::from_secs(30)).await {
                    Waited::Ready(shared) => {
                        assert_eq!(shared.head, "head");
                        read_all(shared.reader().unwrap()).await.unwrap()
                    }
                    _ => panic!("not ready"),
                }
            })
        })
        .collect();
    let mut publisher = leader.publish("head");
    let own = publisher.shared().reader().unwrap();
    for i in 0..50u8 {
        publisher.push(Bytes::from(vec![i; 1000]));
        tokio::task::yield_now().await;
    }
    publisher.end();
    // A request arriving after the body ended but before the store commits still joins.
    let Join::Follower(late) = flights.join("k") else {
        panic!("the flight is joinable until done")
    };
    let Waited::Ready(late) = late.wait(Duration::from_secs(1)).await else {
        panic!("late follower not ready")
    };
    let late_reader = late.reader().unwrap();
    publisher.done();
    // Once done, the body is trimmed as readers go: nobody new starts from its beginning (the
    // object is stored by then; a new request looks it up instead).
    assert!(late.reader().is_none());
    assert!(flights.is_empty());
    let expected: Vec<u8> = (0..50u8).flat_map(|i| vec![i; 1000]).collect();
    assert_eq!(read_all(own).await.unwrap(), expected);
    for wait in waits {
        assert_eq!(wait.await.unwrap(), expected);
    }
    assert_eq!(read_all(late_reader).await.unwrap(), expected);
}

#[tokio::test]
async fn release_wakes_followers_to_go_upstream_and_frees_the_key() {
    let flights = flights();
    let Join::Leader(leader) = flights.join("k") else {
        panic!()
    };
    let Join::Follower(follower) = flights.join("k") else {
        panic!()
    };
    let wait = tokio::spawn(follower.wait(Duration::from_secs(30)));
    leader.release();
    assert!(matches!(wait.await.unwrap(), Waited::Released));
    assert!(matches!(flights.join("k"), Join::Leader(_)));
}

#[tokio::test]
async fn a_dropped_leader_releases_too() {
    let flights = flights();
    let leader = flights.join("k");
    let Join::Follower(follower) = flights.join("k") else {
        panic!()
    };
    drop(leader);
    assert!(matches!(
        follower.wait(Duration::from_secs(30)).await,
        Waited::Released
    ));
}

#[tokio::test(start_paused = true)]
async fn a_follower_gives_up_at_its_lock_timeout() {
    let flights = flights();
    let _leader = flights.join("k");
    let Join::Follower(follower) = flights.join("k") else {
        panic!()
    };
    assert!(matches!(
        follower.wait(Duration::from_secs(5)).await,
        Waited::TimedOut
    ));
}

#[tokio::test]
async fn a_failed_body_is_an_error_for_every_reader() {
    let flights = flights();
    let Join::Leader(leader) = flights.join("k") else {
        panic!()
    };
    let publisher = leader.publish("head");
    let reader = publisher.shared().reader().unwrap();
    publisher.push(Bytes::from_static(b"part"));
    drop(publisher);
    assert!(read_all(reader).await.is_err());
    assert!(flights.is_empty());
}

#[tokio::test]
async fn a_detached_body_keeps_only_the_window_and_waits_for_the_slow_reader() {
    let flights = flights();
    let Join::Leader(leader) = flights.join("k") else {
        panic!()
    };
    let mut publisher = leader.publish("head");
    let mut slow = publisher.shared().reader().unwrap();
    publisher.detach();
    // Detached: nobody new joins the flight, and no reader can start from the beginning.
    assert!(matches!(flights.join("k"), Join::Leader(_)));
    assert!(publisher.shared().reader().is_none());

    let chunk = Bytes::from(vec![7u8; 64 * 1024]);
    let mut pushed = 0usize;
    let waker = futures_util::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    while publisher.poll_room(&mut cx).is_ready() {
        publisher.push(chunk.clone());
        pushed += chunk.len();
        assert!(pushed <= TRIM_WINDOW + chunk.len(), "no back-pressure");
    }
    assert!(lock(&publisher.shared().body).retained > TRIM_WINDOW);
    // The reader catches up: the fill may go on, and what was read is gone.
    let mut read = 0usize;
    while let Some(frame) = slow.frame().await {
        read += frame.unwrap().into_data().unwrap().len();
        if read == pushed {
            break;
        }
    }
    assert!(publisher.poll_room(&mut cx).is_ready());
    assert_eq!(lock(&publisher.shared().body).retained, 0);
    drop(slow);
    assert!(publisher.abandoned());
}

#[tokio::test]
async fn settled_wakes_at_done_and_at_failure() {
    let flights = flights();
    let Join::Leader(leader) = flights.join("k") else {
        panic!()
    };
    let publisher = leader.publish("head");
    let shared = publisher.shared().clone();
    let reader = shared.reader().unwrap();
    let waiting = tokio::spawn({
        let shared = shared.clone();
        async move { shared.settled().await }
    });
    publisher.push(Bytes::from_static(b"whole"));
    let mut publisher = publisher;
    publisher.end();
    assert!(!waiting.is_finished());
    publisher.done();
    waiting.await.unwrap();
    // A reader attached before keeps every byte after the flight settles.
    assert_eq!(read_all(reader).await.unwrap(), b"whole");

    let Join::Leader(leader) = flights.join("k2") else {
        panic!()
    };
    let failed = leader.publish("head");
    let shared = failed.shared().clone();
    drop(failed);
    shared.settled().await;
}

#[tokio::test]
async fn a_reader_that_stopped_is_cut_off_and_the_others_go_on() {
    let flights = flights();
    let Join::Leader(leader) = flights.join("k") else {
        panic!()
    };
    let mut publisher = leader.publish("head");
    let stalled = publisher.shared().reader().unwrap();
    let mut reading = publisher.shared().reader().unwrap();
    publisher.detach();
    let chunk = Bytes::from(vec![1u8; 512 * 1024]);
    for _ in 0..3 {
        publisher.push(chunk.clone());
    }
    // The reading client keeps up; the stalled one holds the window.
    for _ in 0..3 {
        reading.frame().await.unwrap().unwrap();
    }
    let waker = futures_util::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    assert!(publisher.poll_room(&mut cx).is_pending());
    assert_eq!(publisher.cut_slowest(), 1);
    assert!(publisher.poll_room(&mut cx).is_ready());
    assert_eq!(lock(&publisher.shared().body).retained, 0);
    assert!(
        read_all(stalled).await.is_err(),
        "the cut reader's body fails"
    );
    publisher.push(chunk.clone());
    publisher.end();
    assert_eq!(read_all(reading).await.unwrap().len(), chunk.len());
}

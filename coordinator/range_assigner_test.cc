#include "coordinator/range_assigner.h"

#include <gtest/gtest.h>

#include <set>

namespace nova::coordinator {
namespace {

ClusterConfig Initial(int ranges) {
  auto points = EvenSplitPoints(ranges);
  EXPECT_TRUE(points.ok());
  auto c = MakeInitialConfig("demo", points.value(), {});
  EXPECT_TRUE(c.ok());
  return c.value();
}

LiveMembers Ltcs(int n) {
  LiveMembers live;
  for (int i = 1; i <= n; i++) {
    live.ltcs["ltc-" + std::to_string(i)] = "127.0.0.1:" + std::to_string(7000 + i);
  }
  return live;
}

TEST(RangeAssignerTest, SpreadsContiguousBlocksEvenly) {
  auto next = PlanNextConfig(Initial(8), Ltcs(3), {});
  ASSERT_TRUE(next.has_value());
  ASSERT_TRUE(next->Validate().ok()) << next->Validate().ToString();
  EXPECT_EQ(next->RangesOf("ltc-1"), (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_EQ(next->RangesOf("ltc-2"), (std::vector<uint32_t>{3, 4, 5}));
  EXPECT_EQ(next->RangesOf("ltc-3"), (std::vector<uint32_t>{6, 7}));
  EXPECT_EQ(next->ltcs.size(), 3u);
  EXPECT_EQ(next->epoch, 1u);  // the caller bumps it
  // Applying the policy again changes nothing.
  EXPECT_FALSE(PlanNextConfig(*next, Ltcs(3), {}).has_value());
}

TEST(RangeAssignerTest, WaitsForMinLtcs) {
  AssignmentOptions o;
  o.min_ltcs = 2;
  auto next = PlanNextConfig(Initial(4), Ltcs(1), o);
  // The LTC joins the member set, but nothing is assigned yet.
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->RangesOf("").size(), 4u);
  EXPECT_EQ(next->ltcs.size(), 1u);
  next = PlanNextConfig(*next, Ltcs(2), o);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->RangesOf("ltc-1").size(), 2u);
  EXPECT_EQ(next->RangesOf("ltc-2").size(), 2u);
}

TEST(RangeAssignerTest, NoLtcsNoChange) {
  EXPECT_FALSE(PlanNextConfig(Initial(4), LiveMembers(), {}).has_value());
}

TEST(RangeAssignerTest, LostLtcKeepsItsRanges) {
  auto next = PlanNextConfig(Initial(4), Ltcs(2), {});
  ASSERT_TRUE(next.has_value());
  LiveMembers only_one = Ltcs(1);
  // Until the coordinator names it failed (its failover delay), nothing moves.
  EXPECT_FALSE(PlanNextConfig(*next, only_one, {}).has_value());
}

TEST(RangeAssignerTest, FirstOwnersGetOwnerEpochOne) {
  auto next = PlanNextConfig(Initial(4), Ltcs(2), {});
  ASSERT_TRUE(next.has_value());
  for (const RangeAssignment& r : next->ranges) EXPECT_EQ(r.owner_epoch, 1u) << r.id;
}

TEST(RangeAssignerTest, FailedLtcsRangesScatterOverTheLiveOnesWithNewOwnerEpochs) {
  AssignmentOptions o;
  o.min_ltcs = 3;  // holds back the first spread only, never failover
  auto next = PlanNextConfig(Initial(9), Ltcs(3), o);
  ASSERT_TRUE(next.has_value());
  ASSERT_EQ(next->RangesOf("ltc-2"), (std::vector<uint32_t>{3, 4, 5}));
  LiveMembers two = Ltcs(3);
  two.ltcs.erase("ltc-2");
  o.failed = {"ltc-2"};
  auto after = PlanNextConfig(*next, two, o);
  ASSERT_TRUE(after.has_value());
  ASSERT_TRUE(after->Validate().ok()) << after->Validate().ToString();
  EXPECT_TRUE(after->RangesOf("ltc-2").empty());
  // Least loaded first, one range at a time: 3 -> ltc-1, 4 -> ltc-3, 5 -> ltc-1.
  EXPECT_EQ(after->RangesOf("ltc-1"), (std::vector<uint32_t>{0, 1, 2, 3, 5}));
  EXPECT_EQ(after->RangesOf("ltc-3"), (std::vector<uint32_t>{4, 6, 7, 8}));
  for (const RangeAssignment& r : after->ranges) {
    EXPECT_EQ(r.owner_epoch, r.id >= 3 && r.id <= 5 ? 2u : 1u) << r.id;
  }
  // The failed LTC stays a member until it is named removed.
  EXPECT_EQ(after->ltcs.count("ltc-2"), 1u);
  EXPECT_FALSE(PlanNextConfig(*after, two, o).has_value());
  o.removed = {"ltc-2"};
  auto removed = PlanNextConfig(*after, two, o);
  ASSERT_TRUE(removed.has_value());
  EXPECT_EQ(removed->ltcs.count("ltc-2"), 0u);
  EXPECT_EQ(removed->ranges, after->ranges);
  // Back later: a new, empty member.
  auto back = PlanNextConfig(*removed, Ltcs(3), {});
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->ltcs.count("ltc-2"), 1u);
  EXPECT_TRUE(back->RangesOf("ltc-2").empty());
}

TEST(RangeAssignerTest, FailedLtcThatIsLiveAgainOrAloneKeepsItsRanges) {
  auto next = PlanNextConfig(Initial(4), Ltcs(2), {});
  ASSERT_TRUE(next.has_value());
  AssignmentOptions o;
  o.failed = {"ltc-2"};
  o.removed = {"ltc-2"};
  // Registered again before the failover ran: nothing moves.
  EXPECT_FALSE(PlanNextConfig(*next, Ltcs(2), o).has_value());
  // No live LTC to take them: the ranges stay, and so does their owner.
  EXPECT_FALSE(PlanNextConfig(*next, LiveMembers(), o).has_value());
}

// A configuration whose StoCs "0".."n-1" are members; `live` of them registered.
ClusterConfig WithStocs(int n) {
  ClusterConfig c = Initial(2);
  for (int i = 0; i < n; i++) c.stocs[std::to_string(i)] = "127.0.0.1:" + std::to_string(8000 + i);
  return c;
}

LiveMembers Stocs(std::initializer_list<int> ids) {
  LiveMembers live;
  for (int i : ids) live.stocs[std::to_string(i)] = "127.0.0.1:" + std::to_string(8000 + i);
  return live;
}

TEST(RangeAssignerTest, DeadStocLeavesAfterGraceWhileAMajorityIsLive) {
  const ClusterConfig c = WithStocs(4);
  AssignmentOptions o;
  // Dead but not past its grace (not named): it stays.
  EXPECT_FALSE(PlanNextConfig(c, Stocs({0, 1, 2}), o).has_value());
  o.removed_stocs = {"3"};
  EXPECT_EQ(StocRemovalHoldReason(c, Stocs({0, 1, 2})), "");
  auto next = PlanNextConfig(c, Stocs({0, 1, 2}), o);
  ASSERT_TRUE(next.has_value());
  ASSERT_TRUE(next->Validate().ok()) << next->Validate().ToString();
  EXPECT_EQ(next->stocs.size(), 3u);
  EXPECT_EQ(next->stocs.count("3"), 0u);
  EXPECT_EQ(next->ranges, c.ranges);  // nothing else changes
  // A named StoC that is live again is never removed.
  EXPECT_FALSE(PlanNextConfig(c, Stocs({0, 1, 2, 3}), o).has_value());
  // Back later: it joins again by rule 1, as a new member (usable: it was not draining).
  auto back = PlanNextConfig(*next, Stocs({0, 1, 2, 3}), {});
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->stocs.count("3"), 1u);
  EXPECT_TRUE(back->draining_stocs.empty());
}

TEST(RangeAssignerTest, NoStocIsRemovedWithoutALiveMajority) {
  // A power cut: every StoC gone past its grace. Nothing is removed...
  const ClusterConfig c = WithStocs(4);
  AssignmentOptions o;
  o.removed_stocs = {"0", "1", "2", "3"};
  EXPECT_FALSE(PlanNextConfig(c, LiveMembers(), o).has_value());
  EXPECT_NE(StocRemovalHoldReason(c, LiveMembers()).find("0 of the 4"), std::string::npos)
      << StocRemovalHoldReason(c, LiveMembers());
  // ...nor with half of them live (2 of 4 is not a majority)...
  o.removed_stocs = {"2", "3"};
  EXPECT_FALSE(PlanNextConfig(c, Stocs({0, 1}), o).has_value());
  EXPECT_NE(StocRemovalHoldReason(c, Stocs({0, 1})), "");
  // ...but with 3 of 5 (a new one joining counts), both dead ones go in one step.
  auto next = PlanNextConfig(c, Stocs({0, 1, 4}), o);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->stocs.size(), 3u);
  EXPECT_EQ(next->stocs.count("4"), 1u);
  EXPECT_EQ(next->stocs.count("2") + next->stocs.count("3"), 0u);
  // Two StoCs, one dead: 1 of 2 is no majority, so it stays (and so would the last one).
  const ClusterConfig two = WithStocs(2);
  o.removed_stocs = {"1"};
  EXPECT_FALSE(PlanNextConfig(two, Stocs({0}), o).has_value());
  const ClusterConfig one = WithStocs(1);
  o.removed_stocs = {"0"};
  EXPECT_FALSE(PlanNextConfig(one, LiveMembers(), o).has_value());
}

TEST(RangeAssignerTest, DrainingStocsStayDrainingThroughRemovalAndReturn) {
  ClusterConfig c = WithStocs(4);
  c.draining_stocs = {"3"};
  AssignmentOptions o;
  // Registered while draining: listed (rule 1 keeps it a member), still draining.
  auto listed = PlanNextConfig(c, Stocs({0, 1, 2, 3}), o);
  EXPECT_FALSE(listed.has_value());
  ClusterConfig gone = c;
  gone.stocs.erase("3");  // remove-stoc took it out, the process still runs
  auto relisted = PlanNextConfig(gone, Stocs({0, 1, 2, 3}), o);
  ASSERT_TRUE(relisted.has_value());
  EXPECT_EQ(relisted->stocs.count("3"), 1u);
  EXPECT_EQ(relisted->draining_stocs, (std::set<std::string>{"3"}));
  // Removed after its grace while draining: it stays in draining_stocs, so a restarted
  // process with its id joins but is never used for new data.
  o.removed_stocs = {"3"};
  auto removed = PlanNextConfig(c, Stocs({0, 1, 2}), o);
  ASSERT_TRUE(removed.has_value());
  EXPECT_EQ(removed->stocs.count("3"), 0u);
  EXPECT_EQ(removed->draining_stocs, (std::set<std::string>{"3"}));
  auto back = PlanNextConfig(*removed, Stocs({0, 1, 2, 3}), {});
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->stocs.count("3"), 1u);
  EXPECT_EQ(back->draining_stocs.count("3"), 1u);
}

TEST(RangeAssignerTest, StocDrainAndRemovalPlans) {
  const ClusterConfig c = WithStocs(3);
  auto drain = PlanStocDrain(c, "1");
  ASSERT_TRUE(drain.ok()) << drain.status().ToString();
  EXPECT_EQ(drain->draining_stocs, (std::set<std::string>{"1"}));
  EXPECT_EQ(drain->stocs, c.stocs);
  // Again: nothing to change.
  EXPECT_EQ(PlanStocDrain(*drain, "1").value(), *drain);
  EXPECT_TRUE(PlanStocDrain(c, "9").status().IsInvalidArgument());
  // The last StoC that is not draining cannot drain (nowhere for its copies to go).
  auto second = PlanStocDrain(*drain, "2");
  ASSERT_TRUE(second.ok());
  auto last = PlanStocDrain(*second, "0");
  EXPECT_TRUE(last.status().IsInvalidArgument());
  EXPECT_NE(last.status().message().find("last StoC"), std::string::npos);
  // Removal: out of `stocs`, still draining; re-running changes nothing.
  auto removed = PlanStocRemoval(c, "1");
  ASSERT_TRUE(removed.ok());
  ASSERT_TRUE(removed->Validate().ok()) << removed->Validate().ToString();
  EXPECT_EQ(removed->stocs.count("1"), 0u);
  EXPECT_EQ(removed->draining_stocs, (std::set<std::string>{"1"}));
  EXPECT_EQ(PlanStocRemoval(*removed, "1").value(), *removed);
  EXPECT_TRUE(PlanStocRemoval(WithStocs(1), "0").status().IsInvalidArgument());
}

TEST(RangeAssignerTest, UnassignedRangesGoToTheLeastLoaded) {
  ClusterConfig c = Initial(6);
  c.ltcs = {{"ltc-1", "a:1"}, {"ltc-2", "b:1"}};
  c.ranges[0].ltc = c.ranges[1].ltc = c.ranges[2].ltc = "ltc-1";
  auto next = PlanNextConfig(c, Ltcs(2), {});
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->RangesOf("ltc-1").size(), 3u);
  EXPECT_EQ(next->RangesOf("ltc-2").size(), 3u);
}

TEST(RangeAssignerTest, MembersJoinAndAddressesUpdate) {
  auto next = PlanNextConfig(Initial(2), Ltcs(2), {});
  ASSERT_TRUE(next.has_value());
  LiveMembers live = Ltcs(2);
  live.ltcs["ltc-2"] = "127.0.0.1:9999";  // restarted on another port
  live.stocs["stoc-1"] = "127.0.0.1:8001";
  live.logcs["logc-1"] = "127.0.0.1:8101";
  auto after = PlanNextConfig(*next, live, {});
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->ltcs.at("ltc-2"), "127.0.0.1:9999");
  EXPECT_EQ(after->stocs.at("stoc-1"), "127.0.0.1:8001");
  EXPECT_EQ(after->logcs.at("logc-1"), "127.0.0.1:8101");
  EXPECT_EQ(after->ranges, next->ranges);
}

ClusterConfig Logged(ClusterConfig c) {
  c.settings["log_mode"] = "memory";
  return c;
}

TEST(RangeAssignerTest, MigrationMovesOneRangeWithANewOwnerEpoch) {
  auto start = PlanNextConfig(Logged(Initial(4)), Ltcs(2), {});
  ASSERT_TRUE(start.has_value());
  auto plan = PlanMigration(*start, Ltcs(2), 1, "ltc-2");
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->moves.size(), 1u);
  EXPECT_EQ(plan->moves[0].range, 1u);
  EXPECT_EQ(plan->moves[0].from, "ltc-1");
  EXPECT_EQ(plan->moves[0].to, "ltc-2");
  EXPECT_EQ(plan->next.RangesOf("ltc-2"), (std::vector<uint32_t>{1, 2, 3}));
  EXPECT_EQ(plan->next.ranges[1].owner_epoch, 2u);
  EXPECT_TRUE(plan->next.Validate().ok());
  // Again: already there, nothing to do (safe to re-run).
  auto again = PlanMigration(plan->next, Ltcs(2), 1, "ltc-2");
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->moves.empty());
  // Refusals, each with its reason.
  EXPECT_TRUE(PlanMigration(*start, Ltcs(2), 9, "ltc-2").status().IsNotFound());
  EXPECT_TRUE(PlanMigration(*start, Ltcs(2), 1, "ltc-7").status().IsInvalidArgument());
  EXPECT_TRUE(PlanMigration(*start, Ltcs(1), 1, "ltc-2").status().IsInvalidArgument())
      << "ltc-2 is not live";
  ClusterConfig unlogged = *start;
  unlogged.settings.erase("log_mode");
  Status s = PlanMigration(unlogged, Ltcs(2), 1, "ltc-2").status();
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("log_mode"), std::string::npos) << s.ToString();
}

TEST(RangeAssignerTest, DrainMovesEveryRangeAwayAndKeepsTheLtcOutOfAssignments) {
  auto start = PlanNextConfig(Logged(Initial(6)), Ltcs(3), {});
  ASSERT_TRUE(start.has_value());
  auto plan = PlanDrain(*start, Ltcs(3), "ltc-1");
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->moves.size(), 2u);
  EXPECT_TRUE(plan->next.RangesOf("ltc-1").empty());
  EXPECT_EQ(plan->next.RangesOf("ltc-2").size(), 3u);
  EXPECT_EQ(plan->next.RangesOf("ltc-3").size(), 3u);
  EXPECT_EQ(plan->next.draining, (std::set<std::string>{"ltc-1"}));
  // The draining LTC gets nothing from a failover or a rebalance.
  LiveMembers two = Ltcs(3);
  two.ltcs.erase("ltc-3");
  AssignmentOptions o;
  o.failed = {"ltc-3"};
  auto after = PlanNextConfig(plan->next, two, o);
  ASSERT_TRUE(after.has_value());
  EXPECT_TRUE(after->RangesOf("ltc-1").empty());
  EXPECT_EQ(after->RangesOf("ltc-2").size(), 6u);
  auto rebalance = PlanRebalance(*after, two);
  ASSERT_TRUE(rebalance.ok());
  EXPECT_TRUE(rebalance->moves.empty());
  // Draining the last LTC that could take ranges is refused.
  EXPECT_TRUE(PlanDrain(*after, two, "ltc-2").status().IsInvalidArgument());
  // While it runs, it stays listed and draining; once it is gone from the configuration
  // (removed, and no longer registered) it leaves the draining set too.
  ClusterConfig gone = *after;
  gone.ltcs.erase("ltc-1");
  auto relisted = PlanNextConfig(gone, two, {});
  ASSERT_TRUE(relisted.has_value());
  EXPECT_EQ(relisted->ltcs.count("ltc-1"), 1u);
  EXPECT_EQ(relisted->draining.count("ltc-1"), 1u);
  LiveMembers only_two = two;
  only_two.ltcs.erase("ltc-1");
  auto cleaned = PlanNextConfig(gone, only_two, {});
  ASSERT_TRUE(cleaned.has_value());
  EXPECT_TRUE(cleaned->draining.empty());
}

TEST(RangeAssignerTest, RebalanceEvensOutOverLiveLtcs) {
  auto start = PlanNextConfig(Logged(Initial(7)), Ltcs(2), {});
  ASSERT_TRUE(start.has_value());
  // A third LTC joins: it becomes a member owning nothing.
  auto joined = PlanNextConfig(*start, Ltcs(3), {});
  ASSERT_TRUE(joined.has_value());
  EXPECT_TRUE(joined->RangesOf("ltc-3").empty());
  auto plan = PlanRebalance(*joined, Ltcs(3));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->moves.size(), 2u);
  for (const char* id : {"ltc-1", "ltc-2", "ltc-3"}) {
    const size_t n = plan->next.RangesOf(id).size();
    EXPECT_TRUE(n == 2 || n == 3) << id << " owns " << n;
  }
  for (const RangeMove& m : plan->moves) EXPECT_EQ(m.to, "ltc-3");
  auto again = PlanRebalance(plan->next, Ltcs(3));
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->moves.empty());
}

TEST(RangeAssignerTest, ANewIncarnationBumpsTheOwnerEpochsOfItsRanges) {
  LiveMembers live = Ltcs(2);
  live.ltc_incarnations = {{"ltc-1", "a1"}, {"ltc-2", "b1"}};
  auto first = PlanNextConfig(Initial(4), live, {});
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->ltc_incarnations, live.ltc_incarnations);
  for (const RangeAssignment& r : first->ranges) EXPECT_EQ(r.owner_epoch, 1u) << r.id;
  EXPECT_FALSE(PlanNextConfig(*first, live, {}).has_value()) << "nothing new";
  // ltc-2 restarted (its previous process may still run): its ranges get new owner epochs.
  live.ltc_incarnations["ltc-2"] = "b2";
  auto next = PlanNextConfig(*first, live, {});
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->ltc_incarnations.at("ltc-2"), "b2");
  for (const RangeAssignment& r : next->ranges) {
    EXPECT_EQ(r.owner_epoch, r.ltc == "ltc-2" ? 2u : 1u) << r.id;
  }
  // It leaves the configuration: its incarnation goes too.
  live.ltcs.erase("ltc-2");
  live.ltc_incarnations.erase("ltc-2");
  AssignmentOptions o;
  o.failed = o.removed = {"ltc-2"};
  auto gone = PlanNextConfig(*next, live, o);
  ASSERT_TRUE(gone.has_value());
  // (Failed over and removed in one step: it owns nothing once its ranges moved.)
  EXPECT_EQ(gone->ltc_incarnations.count("ltc-2"), 0u);
  EXPECT_EQ(gone->ltcs.count("ltc-2"), 0u);
}

TEST(RangeAssignerTest, LiveMovesQueueMigrationsAndLeaveOwnersAlone) {
  auto start = PlanNextConfig(Initial(4), Ltcs(2), {});  // log_mode unset: none
  ASSERT_TRUE(start.has_value());
  auto plan = PlanMigration(*start, Ltcs(2), 1, "ltc-2", MoveMode::kLive);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();  // any log mode
  ASSERT_EQ(plan->moves.size(), 1u);
  EXPECT_EQ(plan->next.ranges[1].ltc, "ltc-1");
  EXPECT_EQ(plan->next.ranges[1].owner_epoch, start->ranges[1].owner_epoch);
  ASSERT_EQ(plan->next.migrations.size(), 1u);
  EXPECT_EQ(plan->next.migrations[0],
            (RangeMigration{1, "ltc-1", "ltc-2", start->ranges[1].owner_epoch, false, 0}));
  EXPECT_TRUE(plan->next.Validate().ok());
  // Re-running keeps the entry as it is.
  auto again = PlanMigration(plan->next, Ltcs(2), 1, "ltc-2", MoveMode::kLive);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->next.migrations, plan->next.migrations);
  // Back to where it is: the queued migration is cancelled.
  auto back = PlanMigration(plan->next, Ltcs(2), 1, "ltc-1", MoveMode::kLive);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->next.migrations.empty());
  // A running migration elsewhere is not re-aimed.
  ClusterConfig running = plan->next;
  running.migrations[0].running = true;
  LiveMembers three = Ltcs(3);
  running.ltcs["ltc-3"] = three.ltcs["ltc-3"];
  EXPECT_TRUE(PlanMigration(running, three, 1, "ltc-3", MoveMode::kLive).status().IsInvalidArgument());
  // Drain and rebalance queue one migration per move.
  auto drain = PlanDrain(*start, Ltcs(2), "ltc-1", MoveMode::kLive);
  ASSERT_TRUE(drain.ok()) << drain.status().ToString();
  EXPECT_EQ(drain->next.migrations.size(), 2u);
  EXPECT_EQ(drain->next.RangesOf("ltc-1").size(), 2u);
  EXPECT_EQ(drain->next.draining.count("ltc-1"), 1u);
  // JSON keeps them.
  auto parsed = ClusterConfig::FromJson(drain->next.ToJson());
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->migrations, drain->next.migrations);
}

TEST(RangeAssignerTest, TheLeaderStartsMigrationsUpToTheLimitAndDropsStaleOnes) {
  auto start = PlanNextConfig(Initial(6), Ltcs(2), {});
  ASSERT_TRUE(start.has_value());
  ClusterConfig c = *start;
  for (uint32_t r : c.RangesOf("ltc-1")) {
    c.migrations.push_back(RangeMigration{r, "ltc-1", "ltc-2", c.Range(r)->owner_epoch, false, 0});
  }
  ASSERT_EQ(c.migrations.size(), 3u);
  AssignmentOptions o;
  o.max_concurrent_migrations = 2;
  o.now_ms = 1000;
  auto next = PlanNextConfig(c, Ltcs(2), o);
  ASSERT_TRUE(next.has_value());
  EXPECT_TRUE(next->migrations[0].running);
  EXPECT_TRUE(next->migrations[1].running);
  EXPECT_FALSE(next->migrations[2].running) << "only two at once";
  EXPECT_EQ(next->migrations[0].started_ms, 1000u);
  EXPECT_FALSE(PlanNextConfig(*next, Ltcs(2), o).has_value()) << "stable";
  // The first one committed (its destination owns the range, entry gone): the third starts.
  ClusterConfig committed = *next;
  committed.Range(committed.migrations[0].range)->SetOwner("ltc-2");
  committed.migrations.erase(committed.migrations.begin());
  next = PlanNextConfig(committed, Ltcs(2), o);
  ASSERT_TRUE(next.has_value());
  ASSERT_EQ(next->migrations.size(), 2u);
  EXPECT_TRUE(next->migrations[1].running);
  // A range whose owner epoch changed (a restart, failover): its migration is stale.
  ClusterConfig bumped = *next;
  bumped.Range(bumped.migrations[0].range)->BumpOwnerEpoch();
  next = PlanNextConfig(bumped, Ltcs(2), o);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->migrations.size(), 1u);
  // Timed out: dropped (rolled back).
  o.now_ms = 1000 + o.migration_timeout_ms + 1;
  next = PlanNextConfig(*next, Ltcs(2), o);
  ASSERT_TRUE(next.has_value());
  EXPECT_TRUE(next->migrations.empty());
  // The destination is gone: dropped.
  ClusterConfig lost = committed;
  o.now_ms = 1000;
  next = PlanNextConfig(lost, Ltcs(1), o);
  ASSERT_TRUE(next.has_value());
  EXPECT_TRUE(next->migrations.empty());
}

TEST(RangeAssignerTest, AFailedSourcesMigratingRangeGoesToTheDestination) {
  auto start = PlanNextConfig(Initial(6), Ltcs(3), {});
  ASSERT_TRUE(start.has_value());
  ClusterConfig c = *start;
  const std::vector<uint32_t> owned = c.RangesOf("ltc-1");
  ASSERT_EQ(owned.size(), 2u);
  // ltc-1 was migrating its second range to ltc-3 (which owns as many as ltc-2).
  const uint32_t migrating = owned[1];
  c.migrations.push_back(
      RangeMigration{migrating, "ltc-1", "ltc-3", c.Range(migrating)->owner_epoch, true, 5});
  LiveMembers live = Ltcs(3);
  live.ltcs.erase("ltc-1");
  AssignmentOptions o;
  o.failed = {"ltc-1"};
  o.now_ms = 10;
  auto next = PlanNextConfig(c, live, o);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->Range(migrating)->ltc, "ltc-3");
  // At the owner epoch the destination staged its copy for: the next one.
  EXPECT_EQ(next->Range(migrating)->owner_epoch, c.Range(migrating)->owner_epoch + 1);
  EXPECT_TRUE(next->migrations.empty()) << "the range moved: the migration is over";
  EXPECT_TRUE(next->RangesOf("ltc-1").empty());
}

}  // namespace
}  // namespace nova::coordinator

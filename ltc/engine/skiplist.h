// SkipList: an ordered set in an Arena that one writer grows while many readers search
// and iterate it without locks. The memtable's index (ltc/engine/memtable.h).
//
//   SkipList<const char*, EntryComparator> list(cmp, &arena, seed);
//   list.Insert(entry);                       // under the caller's write mutex
//   SkipList<...>::Iterator it(&list);        // any thread, no lock
//   for (it.Seek(target); it.Valid(); it.Next()) Use(it.key());
//
// Keys are never removed. Each node has a random height in [1, kMaxHeight]: height h+1 with
// probability 1/kBranching of height h, so a search visits O(log n) nodes.
//
// Thread safety (the invariants the lock-free readers rely on):
//  1. Insert() is called by one thread at a time; the caller serializes writers (the memtable
//     holds its write mutex), which also orders each Insert after the previous one.
//  2. Readers (Contains, Iterator) need no lock and may run concurrently with Insert().
//  3. A node is fully built (key, and its own next pointer at every level) before it becomes
//     reachable. It is published level by level, bottom up, each by a release store into the
//     predecessor's next pointer; readers load next pointers with acquire. So a reader that
//     reaches a node sees its key, everything the writer wrote before Insert() (the entry
//     bytes a `const char*` key points to), and its lower-level next pointers.
//  4. Nodes are never unlinked, moved or freed while the list exists; a key returned by an
//     iterator stays valid until the list (and its Arena) is destroyed.
//  5. max_height_ is a hint read with relaxed ordering: a reader that sees a new, larger
//     height finds null at the head on the new levels until the node is linked, and
//     simply descends.
//  6. Readers see some sorted subset of the keys: every key whose Insert() returned before
//     the read began, plus perhaps some being inserted. An iterator is not a snapshot; the
//     memtable gets snapshots from sequence numbers.
//  7. The comparator is called concurrently from readers and the writer; it must be
//     thread-safe (const, no mutable state). The list must be destroyed only when no
//     reader is left.
#pragma once

#include <glog/logging.h>

#include <atomic>
#include <cstdint>
#include <new>
#include <random>
#include <type_traits>

#include "ltc/engine/arena.h"

namespace nova::ltc {

// Key: a trivially copyable, trivially destructible value (the arena never runs
// destructors), e.g. `const char*` to an encoded entry. Comparator: a copyable callable
// `int (const Key& a, const Key& b) const` returning <0, 0, >0.
//
// Thread safety: one writer at a time (serialized by the caller) and any number of lock-free
// concurrent readers, under the numbered invariants above.
template <typename Key, class Comparator>
class SkipList {
 private:
  struct Node;

 public:
  // Tallest node: 4^12 = 16M keys before the top level stops thinning the search.
  static constexpr int kMaxHeight = 12;
  // One node in kBranching of height h also has level h+1.
  static constexpr int kBranching = 4;

  // Nodes are allocated from *arena, which must outlive the list and all its iterators.
  // `seed` seeds the list's own height generator (reproducible shapes for tests).
  SkipList(Comparator cmp, Arena* arena, uint64_t seed);
  SkipList(const SkipList&) = delete;
  SkipList& operator=(const SkipList&) = delete;

  // Keys next to a newly inserted key at the bottom level: the largest key before it and
  // the smallest after it, or null at either end. The pointees live as long as the list.
  struct Neighbors {
    const Key* prev = nullptr;
    const Key* next = nullptr;
  };

  // Adds `key` and returns its neighbours. A key comparing equal to existing keys is
  // placed before them (the list stays sorted; the memtable never inserts equal keys).
  // REQUIRES: no concurrent Insert() (invariant 1).
  Neighbors Insert(const Key& key);

  // Like Insert, but the key's data lives in the node's own allocation, right after its
  // links: `fill(char* data)` writes `data_bytes` bytes there and returns the Key for them
  // (e.g. `data` itself for a `const char*` key). A search that reaches the node then finds
  // the key's first bytes in the cache lines it already loaded for the links, instead of
  // taking one more cache miss per node.
  // `data` is aligned to Arena::kAlignment. REQUIRES: no concurrent Insert() (invariant 1).
  template <typename Fill>
  Neighbors InsertWithData(size_t data_bytes, Fill fill);

  // True if a key comparing equal to `key` is in the list.
  bool Contains(const Key& key) const;

  // A position in the list. Lock-free (see the thread-safety invariants above); one
  // Iterator is used by one thread at a time. The list must outlive the iterator.
  class Iterator {
   public:
    // Starts invalid.
    explicit Iterator(const SkipList* list) : list_(list) {}

    // True when positioned at a key.
    bool Valid() const { return node_ != nullptr; }
    // The key at the current position. REQUIRES: Valid()
    const Key& key() const {
      DCHECK(Valid());
      return node_->key;
    }
    // Moves to the next key; becomes invalid after the last. REQUIRES: Valid()
    void Next() {
      DCHECK(Valid());
      node_ = node_->Next(0);
    }
    // Moves to the largest key smaller than key() (a search from the head: nodes have no
    // back pointers); becomes invalid before the first. REQUIRES: Valid()
    void Prev() {
      DCHECK(Valid());
      node_ = list_->FindLast(&node_->key);
    }
    // Moves to the first key >= target (invalid if none).
    void Seek(const Key& target) { node_ = list_->FindGreaterOrEqual(target, nullptr); }
    // Moves to the first / last key (invalid if the list is empty).
    void SeekToFirst() { node_ = list_->head_->Next(0); }
    void SeekToLast() { node_ = list_->FindLast(nullptr); }

   private:
    const SkipList* const list_;  // must outlive this
    const Node* node_ = nullptr;  // null: not valid
  };

 private:
  struct alignas(std::atomic<Node*>) Node {
    explicit Node(const Key& k) : key(k) {}

    // The node's `height` next pointers follow it in the same arena allocation.
    std::atomic<Node*>* links() {
      return std::launder(reinterpret_cast<std::atomic<Node*>*>(this + 1));
    }
    const std::atomic<Node*>* links() const {
      return std::launder(reinterpret_cast<const std::atomic<Node*>*>(this + 1));
    }
    // Acquire: whoever sees the successor sees it fully built (invariant 3).
    Node* Next(int level) const { return links()[level].load(std::memory_order_acquire); }
    // Release: publishes `n` and everything written before it.
    void SetNext(int level, Node* n) { links()[level].store(n, std::memory_order_release); }
    // For a node not yet reachable by readers.
    void InitNext(int level, Node* n) { links()[level].store(n, std::memory_order_relaxed); }

    const Key key;
  };
  static_assert(std::is_trivially_copyable_v<Key> && std::is_trivially_destructible_v<Key>,
                "arena nodes are never destroyed");
  static_assert(sizeof(Node) % alignof(std::atomic<Node*>) == 0);

  Node* NewNode(const Key& key, int height);
  // Bytes of a node of `height` links (the data of InsertWithData follows them).
  static size_t NodeBytes(int height) {
    return sizeof(Node) + sizeof(std::atomic<Node*>) * static_cast<size_t>(height);
  }
  // Builds a node of `height` with `key` at mem (NodeBytes(height) bytes, aligned).
  static Node* BuildNode(char* mem, const Key& key, int height);
  // Links `node` (of `height`, built but unreachable) in place; returns its neighbours.
  Neighbors Link(Node* node, int height);
  int RandomHeight();
  int max_height() const { return max_height_.load(std::memory_order_relaxed); }
  // True if `n` is a node (not the end of a level) whose key is < key.
  bool NodeBefore(const Node* n, const Key& key) const {
    return n != nullptr && cmp_(n->key, key) < 0;
  }

  // The first node whose key >= key, or null. When `prev` is not null, fills
  // prev[level] with the last node before `key` on each level below max_height().
  Node* FindGreaterOrEqual(const Key& key, Node** prev) const;
  // The last node whose key < *bound (every node when bound is null); null if that is the
  // head.
  Node* FindLast(const Key* bound) const;

  // Constant after construction.
  const Comparator cmp_;
  Arena* const arena_;  // must outlive this
  Node* const head_;    // kMaxHeight links, no key

  // Height of the tallest node, at least 1 (invariant 5).
  std::atomic<int> max_height_{1};
  // Used only by Insert() (invariant 1).
  std::mt19937_64 rng_;
};

template <typename Key, class Comparator>
SkipList<Key, Comparator>::SkipList(Comparator cmp, Arena* arena, uint64_t seed)
    : cmp_(cmp), arena_(arena), head_(NewNode(Key{}, kMaxHeight)), rng_(seed) {}

template <typename Key, class Comparator>
typename SkipList<Key, Comparator>::Node* SkipList<Key, Comparator>::NewNode(const Key& key,
                                                                             int height) {
  return BuildNode(arena_->AllocateAligned(NodeBytes(height)), key, height);
}

template <typename Key, class Comparator>
typename SkipList<Key, Comparator>::Node* SkipList<Key, Comparator>::BuildNode(char* mem,
                                                                               const Key& key,
                                                                               int height) {
  Node* node = new (mem) Node(key);
  auto* links = reinterpret_cast<std::atomic<Node*>*>(mem + sizeof(Node));
  for (int i = 0; i < height; ++i) new (&links[i]) std::atomic<Node*>(nullptr);
  return node;
}

template <typename Key, class Comparator>
int SkipList<Key, Comparator>::RandomHeight() {
  // Two random bits per level (kBranching = 4): one draw covers every level.
  static_assert(kBranching == 4 && 2 * kMaxHeight <= 64);
  uint64_t bits = rng_();
  int height = 1;
  while (height < kMaxHeight && (bits & (kBranching - 1)) == 0) {
    ++height;
    bits >>= 2;
  }
  return height;
}

template <typename Key, class Comparator>
typename SkipList<Key, Comparator>::Node* SkipList<Key, Comparator>::FindGreaterOrEqual(
    const Key& key, Node** prev) const {
  Node* x = head_;
  for (int level = max_height() - 1; level >= 0; --level) {
    Node* next = x->Next(level);
    while (NodeBefore(next, key)) {
      x = next;
      next = x->Next(level);
    }
    if (prev != nullptr) prev[level] = x;
    if (level == 0) return next;
  }
  return nullptr;  // unreachable: max_height() >= 1
}

template <typename Key, class Comparator>
typename SkipList<Key, Comparator>::Node* SkipList<Key, Comparator>::FindLast(
    const Key* bound) const {
  Node* x = head_;
  for (int level = max_height() - 1; level >= 0; --level) {
    Node* next = x->Next(level);
    while (next != nullptr && (bound == nullptr || NodeBefore(next, *bound))) {
      x = next;
      next = x->Next(level);
    }
  }
  return x == head_ ? nullptr : x;
}

template <typename Key, class Comparator>
typename SkipList<Key, Comparator>::Neighbors SkipList<Key, Comparator>::Insert(const Key& key) {
  const int height = RandomHeight();
  return Link(NewNode(key, height), height);
}

template <typename Key, class Comparator>
template <typename Fill>
typename SkipList<Key, Comparator>::Neighbors SkipList<Key, Comparator>::InsertWithData(
    size_t data_bytes, Fill fill) {
  // NodeBytes is a multiple of the pointer size, so the data is as aligned as the node.
  static_assert(sizeof(Node) % Arena::kAlignment == 0 &&
                sizeof(std::atomic<Node*>) % Arena::kAlignment == 0);
  const int height = RandomHeight();
  char* const mem = arena_->AllocateAligned(NodeBytes(height) + data_bytes);
  const Key key = fill(mem + NodeBytes(height));
  return Link(BuildNode(mem, key, height), height);
}

template <typename Key, class Comparator>
typename SkipList<Key, Comparator>::Neighbors SkipList<Key, Comparator>::Link(Node* node,
                                                                           int height) {
  Node* prev[kMaxHeight];
  Node* next = FindGreaterOrEqual(node->key, prev);

  const int old_height = max_height();
  if (height > old_height) {
    for (int level = old_height; level < height; ++level) prev[level] = head_;
    // Relaxed is enough (invariant 5): readers that see the new height before the links
    // below find null at the head and descend.
    max_height_.store(height, std::memory_order_relaxed);
  }

  for (int level = 0; level < height; ++level) {
    // The node is not reachable yet at `level`: a plain store of its own link suffices;
    // the release store into the predecessor then publishes both (invariant 3).
    node->InitNext(level, prev[level]->links()[level].load(std::memory_order_relaxed));
    prev[level]->SetNext(level, node);
  }

  Neighbors result;
  if (prev[0] != head_) result.prev = &prev[0]->key;
  if (next != nullptr) result.next = &next->key;
  return result;
}

template <typename Key, class Comparator>
bool SkipList<Key, Comparator>::Contains(const Key& key) const {
  const Node* x = FindGreaterOrEqual(key, nullptr);
  return x != nullptr && cmp_(x->key, key) == 0;
}

}  // namespace nova::ltc

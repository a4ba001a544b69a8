// ErasureCode: a systematic Reed-Solomon code over GF(2^8) with ISA-L (paper section
// 4.4.4.1, "parity"): k data columns and m parity columns of equal length; any k of the
// k + m columns give back the others, byte for byte.
//
// The code's matrix is ISA-L's gf_gen_cauchy1_matrix(k + m, k): its first k rows are the
// identity (the data columns themselves), row k + j makes parity column j. Every k x k
// submatrix of a Cauchy-extended identity is invertible, so any k surviving columns decode.
// DO NOT CHANGE the matrix: parity fragments on StoCs were computed with it (persisted).
//
// Columns of unequal length (a table's fragments): EncodeUneven treats every column as if
// padded with zero bytes to the longest, without copying the long ones.
//
//   auto code = ErasureCode::Make(/*k=*/3, /*m=*/1);
//   std::vector<std::string> parity;
//   code->EncodeUneven({frag0, frag1, frag2}, &parity);   // parity[0]: max length bytes
//   // fragment 1 lost: rebuild bytes [off, off + n) of it from the others
//   const uint8_t* rows[] = {f0 + off, f2 + off, p0 + off};  // zero-padded where short
//   code->Reconstruct(/*want=*/1, /*have=*/{0, 2, 3}, n, rows, out);
//
// Thread safety: immutable after Make; every method is const and may run concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace nova {

class ErasureCode {
 public:
  // Largest k + m (GF(2^8) has 255 usable Cauchy rows; far beyond any stripe here).
  static constexpr int kMaxColumns = 255;

  // InvalidArgument unless k >= 1, m >= 1 and k + m <= kMaxColumns.
  static Result<ErasureCode> Make(int k, int m);

  int k() const { return k_; }
  int m() const { return m_; }

  // Computes the m parity columns of `len` bytes each: data[i] points to len bytes of data
  // column i (i < k), parity[j] to len writable bytes for parity column j (j < m).
  void Encode(size_t len, const uint8_t* const* data, uint8_t* const* parity) const;

  // Parity of columns of unequal length: REQUIRES columns.size() == k. Sets *parity to m
  // strings as long as the longest column, computed as if each shorter column were padded
  // with zero bytes. Works in pieces, so only short columns' tails are copied.
  void EncodeUneven(const std::vector<std::string_view>& columns,
                    std::vector<std::string>* parity) const;

  // Rebuilds `len` bytes of column `want` (0..k+m-1: data columns first, then parity)
  // from k other columns: have[i] is a column index and rows[i] points to the same `len`
  // bytes (the same offset) of that column. Writes them to out. InvalidArgument unless
  // `have` holds exactly k distinct indices in [0, k + m), none equal to `want`, and want
  // is in range.
  Status Reconstruct(int want, const std::vector<int>& have, size_t len,
                     const uint8_t* const* rows, uint8_t* out) const;

 private:
  // Result<ErasureCode> value-initializes its T before Make assigns the real one.
  friend class Result<ErasureCode>;
  ErasureCode() = default;
  ErasureCode(int k, int m);

  int k_ = 0;
  int m_ = 0;
  std::vector<uint8_t> matrix_;         // (k + m) x k, row-major
  std::vector<uint8_t> encode_tables_;  // ec_init_tables of the m parity rows
};

}  // namespace nova

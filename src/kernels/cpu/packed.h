// Weights repacked once at load for the integer kernels: kPackRows rows' blocks
// interleaved so that one 32-byte load holds 4 consecutive codes of each of the 8
// rows. A broadcast of 4 activation bytes then meets all 8 rows in one maddubs, and
// the 8 row sums land in the 8 lanes of one register: no horizontal reductions.
//
// Layout of one packed block (32 elements of 8 rows) of Q4_0, Q4_1, Q5_0, Q5_1, Q8_0:
//   8 fp16 scales (row 0..7); 8 fp16 mins (Q4_1, Q5_1); for each of the 4 nibble chunks two
//   32-bit words of fifth bits, bit 4r+i for element 4c+i and 16+4c+i of row r (Q5_0, Q5_1);
//   then chunks of 32 bytes: chunk c holds, at bytes 4r..4r+3, bytes 4c..4c+3 of row r's
//   quant bytes (16 nibble bytes: 4 chunks; Q8_0's 32 code bytes: 8 chunks).
//   Rows past the end of the matrix are zero.
// MXFP4 packs as Q4_0 with 8 float scales 2^(e - 128) in place of the fp16 ones.
// F32/F16/BF16 pack k-major: the 8 rows' element k side by side, as one vector of 8.
// Q4_K packs a super-block of 256: d[8], dmin[8], the 6-bit scales unpacked to bytes
// [sub-block][row], the mins as [sub-block pair][row][2], then 32 chunks of nibbles.
// Q5_K: as Q4_K, then 8 chunks of the high-bit bytes.
// Q6_K: d[8], the int8 scales as [sub-block pair][row][2], then 32 chunks of the low-nibble bytes
// and 16 of the high-bit bytes, in the file's order.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/function_ref.h"
#include "core/thread_pool.h"
#include "kernels/cpu/weight_matrix.h"

namespace autoglm::cpu {

constexpr int kPackRows = 8;

bool packable(DType t);
// F32, F16, BF16: packed k-major, element k of the group's row r at position k * 8 + r.
bool packed_as_floats(DType t);
int64_t packed_block_bytes(DType t);
int64_t packed_groups(const WeightMatrix& w);  // ceil(rows / kPackRows)
int64_t packed_bytes(const WeightMatrix& w);
// What matmul splits across threads: groups, or pairs of groups for the float kernels.
int64_t packed_work_units(const WeightMatrix& w);

// Writes row groups [g0, g1) of w into the packed buffer `dst` (the whole matrix's buffer).
void pack_groups(const WeightMatrix& w, uint8_t* dst, int64_t g0, int64_t g1);

struct AlignedFree {
  void operator()(uint8_t* p) const;
};
using PackedBuffer = std::unique_ptr<uint8_t[], AlignedFree>;

// packed_bytes(w) rounded up to 64: the room w takes in a buffer shared with other matrices.
int64_t packed_room(const WeightMatrix& w);
// A buffer for packed weights, 64-byte aligned (null when out of memory). From 2 MiB on it starts
// on a huge-page boundary and asks for transparent huge pages before its first write: a decode
// streams every weight byte once a step, and on 4 KiB pages it also walks the page tables once per
// 4 KiB (a 12-layer 30B-A3B Q4_K decode measured 5% faster with them on Emerald Rapids).
PackedBuffer allocate_packed(size_t bytes);
// Packs w into dst (packed_room(w) bytes, 64-byte aligned) on the pool's threads and points
// w.packed at it.
void pack_matrix_into(ThreadPool& pool, WeightMatrix& w, uint8_t* dst);
// Packs every matrix into one buffer from allocate_packed, packed_room apart (so that the many small
// matrices of a layer's experts share huge pages too), and points each one's packed at its part;
// after_each(i) follows matrix i. Null when out of memory.
PackedBuffer pack_matrices(ThreadPool& pool, const std::vector<WeightMatrix*>& matrices,
                           FunctionRef<void(size_t)> after_each);
// Packs w into a buffer of its own (64-byte aligned, not on huge pages) and points w.packed at the
// result, which the caller keeps.
PackedBuffer pack_matrix(ThreadPool& pool, WeightMatrix& w);
// As pack_matrix, into `buf` when its `capacity` (bytes) suffices (a buffer kept from a matrix of
// the same shape: no allocation), else into a new one whose size goes to `capacity`.
void repack_matrix(ThreadPool& pool, WeightMatrix& w, PackedBuffer& buf, int64_t& capacity);

}  // namespace autoglm::cpu

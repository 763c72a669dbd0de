package demo

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"

	"github.com/dspark-dev/dspark/runtime/kernels"
)

// f32Mat packs a rows x cols row-major float32 matrix for the kernels (f32 activations: the
// products are the kernels' fixed-order float32 chains, identical on every machine).
func f32Mat(a []float32, rows, cols int) (*kernels.Mat, error) {
	b := make([]byte, 4*len(a))
	for i, x := range a {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	m, err := kernels.NewMat(kernels.F32, rows, cols, b)
	if err != nil {
		return nil, err
	}
	return m.Pack()
}

// mulRows sets dst row j = m · x row j for n rows (any n).
func mulRows(m *kernels.Mat, dst, x []float32, n int) {
	R, C := m.Rows(), m.Cols()
	for j := 0; j < n; j += kernels.MaxBatch {
		k := min(kernels.MaxBatch, n-j)
		m.MatMul(dst[j*R:(j+k)*R], x[j*C:(j+k)*C], k)
	}
}

// lowRank returns the factors of a rank-r approximation L ≈ W1 · W2ᵀ of the v x v row-major
// matrix L (W1, W2: v x r, row-major), from a randomized range finder: Y = L Ω for a seeded
// Gaussian Ω, q power iterations Y = L Lᵀ Y, Q = orth(Y), B = Qᵀ L. Column j of W1 is Q's
// column j times sqrt(|B_j|) and column j of W2 is row j of B over sqrt(|B_j|), so both
// factors carry half the scale of each direction. Products run through the kernels (float32);
// orthonormalization is in float64.
func lowRank(L []float32, v, r, q int, seed uint64) (W1, W2 []float32, err error) {
	if r <= 0 || r > v || len(L) != v*v {
		return nil, nil, fmt.Errorf("demo: low-rank factor of rank %d for a %d x %d table of %d values", r, v, v, len(L))
	}
	lm, err := f32Mat(L, v, v)
	if err != nil {
		return nil, nil, err
	}
	defer lm.Release()
	lt := make([]float32, v*v)
	for a := 0; a < v; a++ {
		for b := 0; b < v; b++ {
			lt[b*v+a] = L[a*v+b]
		}
	}
	ltm, err := f32Mat(lt, v, v)
	if err != nil {
		return nil, nil, err
	}
	defer ltm.Release()
	rng := rand.New(rand.NewPCG(seed, 0x10e4a))
	// Rows of yt are the columns of Y (r vectors of length v).
	yt := make([]float32, r*v)
	omega := make([]float32, r*v)
	for i := range omega {
		omega[i] = float32(rng.NormFloat64())
	}
	mulRows(lm, yt, omega, r)
	orthRows(yt, r, v)
	zt := make([]float32, r*v)
	for range q {
		// Z = Lᵀ Q, Y = L Z: one orthonormalization per power iteration is enough in float32
		// (the spread of squared singular values stays far above float32's resolution).
		mulRows(ltm, zt, yt, r)
		mulRows(lm, yt, zt, r)
		orthRows(yt, r, v)
	}
	bt := make([]float32, r*v) // row j = Lᵀ q_j = row j of B
	mulRows(ltm, bt, yt, r)
	W1, W2 = make([]float32, v*r), make([]float32, v*r)
	for j := 0; j < r; j++ {
		var n float64
		for _, x := range bt[j*v : (j+1)*v] {
			n += float64(x) * float64(x)
		}
		s := math.Sqrt(math.Sqrt(n))
		if s == 0 {
			continue
		}
		for a := 0; a < v; a++ {
			W1[a*r+j] = float32(float64(yt[j*v+a]) * s)
			W2[a*r+j] = float32(float64(bt[j*v+a]) / s)
		}
	}
	return W1, W2, nil
}

// orthRows orthonormalizes the r rows (length v) of y in place, in float64: rows are taken
// in blocks of 16; every row of a block is projected out of all earlier rows twice
// (classical Gram-Schmidt with reorthogonalization; each earlier row is loaded once per
// block and per goroutine, which share the block's rows), then the block is orthonormalized
// by modified Gram-Schmidt, twice.
func orthRows(y []float32, r, v int) {
	q := make([]float64, r*v)
	for i, x := range y {
		q[i] = float64(x)
	}
	const bs = 16
	w := max(1, runtime.GOMAXPROCS(0))
	for j0 := 0; j0 < r; j0 += bs {
		j1 := min(r, j0+bs)
		if j0 > 0 {
			var wg sync.WaitGroup
			for g := 0; g < w; g++ {
				wg.Add(1)
				go func(g int) {
					defer wg.Done()
					var rows [][]float64
					for j := j0 + g; j < j1; j += w {
						rows = append(rows, q[j*v:(j+1)*v])
					}
					d := make([]float64, len(rows)*j0)
					for pass := 0; pass < 2; pass++ {
						for k := 0; k < j0; k++ {
							qk := q[k*v : (k+1)*v]
							for i, row := range rows {
								d[i*j0+k] = dot64(row, qk)
							}
						}
						for k := 0; k < j0; k++ {
							qk := q[k*v : (k+1)*v]
							for i, row := range rows {
								axpy64(row, -d[i*j0+k], qk)
							}
						}
					}
				}(g)
			}
			wg.Wait()
		}
		for pass := 0; pass < 2; pass++ {
			for j := j0; j < j1; j++ {
				row := q[j*v : (j+1)*v]
				for k := j0; k < j; k++ {
					axpy64(row, -dot64(row, q[k*v:(k+1)*v]), q[k*v:(k+1)*v])
				}
				if n := math.Sqrt(dot64(row, row)); n > 0 {
					for i := range row {
						row[i] /= n
					}
				}
			}
		}
	}
	for i, x := range q {
		y[i] = float32(x)
	}
}

// parallelFor runs f(0..n-1) on GOMAXPROCS goroutines (each index exactly once).
func parallelFor(n int, f func(i int)) {
	w := runtime.GOMAXPROCS(0)
	if n < 2 || w == 1 {
		for i := 0; i < n; i++ {
			f(i)
		}
		return
	}
	var wg sync.WaitGroup
	for g := 0; g < w; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := g; i < n; i += w {
				f(i)
			}
		}(g)
	}
	wg.Wait()
}

func dot64(a, b []float64) float64 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func axpy64(y []float64, a float64, x []float64) {
	x = x[:len(y)]
	for i := range y {
		y[i] += a * x[i]
	}
}

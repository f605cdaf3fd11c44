package api

import (
	"math/rand/v2"
	"slices"
	"testing"

	"shoal/statemachine"
)

// Property: firstByID(tasks, after, keep, n) is the first n of the sorted
// IDs above after that keep accepts, whatever order tasks come in (a
// service's tasks come in no order).
func TestFirstByIDIsThePagesTasks(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for round := range 200 {
		var tasks []*statemachine.Task
		for range rng.IntN(40) {
			tasks = append(tasks, &statemachine.Task{ID: statemachine.TaskID(1 + rng.IntN(1000))})
		}
		after, n := uint64(rng.IntN(1000)), 1+rng.IntN(10)
		even := func(t *statemachine.Task) bool { return t.ID%2 == 0 || round%3 == 0 }
		var want []statemachine.TaskID
		for _, tk := range tasks {
			if uint64(tk.ID) > after && even(tk) {
				want = append(want, tk.ID)
			}
		}
		slices.Sort(want)
		want = want[:min(len(want), n)]
		var got []statemachine.TaskID
		for _, tk := range firstByID(tasks, after, even, n) {
			got = append(got, tk.ID)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: after %d, n %d: got %v, want %v", round, after, n, got, want)
		}
	}
}

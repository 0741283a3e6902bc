! A Fortran MPI program that knows nothing of the testbed (tests/programs/alltoall_check.c's twin): MPI_ALLTOALL and
! MPI_ALLTOALLV on MPI_COMM_WORLD at each size given (integers per peer, the arguments), every element and every
! error argument checked; then an in-place MPI_ALLTOALL, which a deploy file must pass through. Prints "ok" on rank
! 0, or how many elements were wrong, and stops with 1. Run under liba2a (LD_PRELOAD) or without it. Built with
! -cpp -DF08 it uses mpi_f08 (the same calls: its handles are typed, its error argument optional) instead of mpi.
program alltoall_check
#ifdef F08
  use mpi_f08
#else
  use mpi
#endif
  implicit none
  integer :: ierr, rank, nprocs, i, count, wrong, wrong_anywhere
  character(len=32) :: argument

  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, nprocs, ierr)
  wrong = 0
  do i = 1, command_argument_count()
    call get_command_argument(i, argument)
    read (argument, *) count
    wrong = wrong + alltoall(count) + alltoallv(count)
  end do
  wrong = wrong + in_place(3)
  call MPI_ALLREDUCE(wrong, wrong_anywhere, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank == 0 .and. wrong_anywhere == 0) print '(a)', 'ok'
  if (rank == 0 .and. wrong_anywhere /= 0) print '(a, i0)', 'wrong: ', wrong_anywhere
  call MPI_FINALIZE(ierr)
  if (wrong_anywhere /= 0) stop 1

contains

  integer function value(from, to, i)
    integer, intent(in) :: from, to, i
    value = from * 1000003 + to * 1009 + i
  end function

  ! count integers to each peer; the elements and error arguments that are wrong
  integer function alltoall(count) result(wrong)
    integer, intent(in) :: count
    integer, allocatable :: send(:), recv(:)
    integer :: j, i, ierr
    allocate (send(max(1, count * nprocs)), recv(max(1, count * nprocs)))
    do j = 0, nprocs - 1
      do i = 0, count - 1
        send(j * count + i + 1) = value(rank, j, i)
      end do
    end do
    recv = -1
    ierr = -1
    ! send(1), the buffer's first element: MPICH's `use mpi` declares no interface for a buffer, and gfortran warns of
    ! a rank mismatch where one call passes an array and another the scalar MPI_IN_PLACE (below)
    call MPI_ALLTOALL(send(1), count, MPI_INTEGER, recv, count, MPI_INTEGER, MPI_COMM_WORLD, ierr)
    wrong = merge(1, 0, ierr /= MPI_SUCCESS)
    do j = 0, nprocs - 1
      do i = 0, count - 1
        if (recv(j * count + i + 1) /= value(j, rank, i)) wrong = wrong + 1
      end do
    end do
  end function

  ! uneven counts (rank r sends (r + j) mod 3 + base integers to j) with gaps between the blocks
  integer function alltoallv(base) result(wrong)
    integer, intent(in) :: base
    integer :: sc(0:nprocs - 1), sd(0:nprocs - 1), rc(0:nprocs - 1), rd(0:nprocs - 1)
    integer, allocatable :: send(:), recv(:)
    integer :: j, i, ierr, st, rt
    st = 0
    rt = 0
    do j = 0, nprocs - 1
      sc(j) = mod(rank + j, 3) + base
      rc(j) = mod(j + rank, 3) + base
      sd(j) = st
      rd(j) = rt
      st = st + sc(j) + 1
      rt = rt + rc(j) + 2
    end do
    allocate (send(st), recv(rt))
    send = -2
    do j = 0, nprocs - 1
      do i = 0, sc(j) - 1
        send(sd(j) + i + 1) = value(rank, j, i)
      end do
    end do
    recv = -1
    ierr = -1
    call MPI_ALLTOALLV(send, sc, sd, MPI_INTEGER, recv, rc, rd, MPI_INTEGER, MPI_COMM_WORLD, ierr)
    wrong = merge(1, 0, ierr /= MPI_SUCCESS)
    do j = 0, nprocs - 1
      do i = 0, rc(j) - 1
        if (recv(rd(j) + i + 1) /= value(j, rank, i)) wrong = wrong + 1
      end do
      if (recv(rd(j) + rc(j) + 1) /= -1) wrong = wrong + 1 ! the gap after each block is untouched
    end do
  end function

  ! in place: the receive buffer holds what is sent
  integer function in_place(count) result(wrong)
    integer, intent(in) :: count
    integer :: buffer(count * nprocs), j, i, ierr
    do j = 0, nprocs - 1
      do i = 0, count - 1
        buffer(j * count + i + 1) = value(rank, j, i)
      end do
    end do
    ierr = -1
    call MPI_ALLTOALL(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buffer, count, MPI_INTEGER, MPI_COMM_WORLD, ierr)
    wrong = merge(1, 0, ierr /= MPI_SUCCESS)
    do j = 0, nprocs - 1
      do i = 0, count - 1
        if (buffer(j * count + i + 1) /= value(j, rank, i)) wrong = wrong + 1
      end do
    end do
  end function
end program

from kandev.cli import main

main()
